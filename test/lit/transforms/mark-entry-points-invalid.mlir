// RUN: sparsecomp-opt %s --split-input-file --verify-diagnostics --sparse-iter-mark-entry-points

// A public function may not declare that it writes into a caller's array.
// expected-error@+1 {{argument #1 of public function '@writes_caller' is declared writable; entry points must not write caller arrays}}
func.func @writes_caller(%n: index, %x: tensor<?xf32> {bufferization.writable = true}) {
  return
}

// -----

// Private functions may: bufferization sees their callers.
func.func private @private_ok(%x: tensor<?xf32> {bufferization.writable = true}) {
  return
}
