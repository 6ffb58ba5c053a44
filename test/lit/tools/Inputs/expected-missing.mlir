// A valid program with an expectation that is not met.
// expected-error@+1 {{this error never happens}}
func.func private @f(tensor<?xf32>)
