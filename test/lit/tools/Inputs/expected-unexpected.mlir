// An invalid program without annotations.

func.func private @f(tensor<?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 3, 32, {}>>)
