// expected-error@+1 oops no braces
func.func @f() {
  return
}
