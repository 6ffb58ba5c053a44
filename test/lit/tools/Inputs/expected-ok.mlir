// expected-error@+1 {{pos_width must be one of 0, 8, 16, 32, 64, got 3}}
func.func private @f(tensor<?xf32, #sparse_iter.layout<["compressed_varied"], affine_map<(i) -> (i)>, 3, 32, {}>>)
