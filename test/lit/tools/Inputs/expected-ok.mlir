// expected-error@+1 {{singleton level 0 must follow a nonunique compressed, loose_compressed or singleton level}}
func.func private @f(tensor<?xf32, #sparse_iter.layout<{map = (i) -> (i : singleton)}>>)
