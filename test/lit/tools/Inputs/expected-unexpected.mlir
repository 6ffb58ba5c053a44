// An invalid program without annotations.

func.func private @f(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : singleton)}>>)
