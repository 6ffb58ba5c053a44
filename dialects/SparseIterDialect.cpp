//===- SparseIterDialect.cpp - the sparse_iter dialect library -----------===//
//
// Attributes and ops come from sparse_iter.td through mlir-tblgen
// (dialects/build.py); this file adds what ODS leaves to C++: the dialect's
// initialize(), attribute verifiers, folders, and the entry point sparsecomp
// calls to register the dialect in a context the MLIR Python bindings made.
//
//===----------------------------------------------------------------------===//

#include "mlir/CAPI/IR.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

#include "Dialect.h.inc"
#define GET_ATTRDEF_CLASSES
#include "Attrs.h.inc"
#define GET_OP_CLASSES
#include "Ops.h.inc"

using namespace mlir;
using namespace sparsecomp::sparse_iter;

//===----------------------------------------------------------------------===//
// Readable parameters (the parsers and printers sparse_iter.td names)
//===----------------------------------------------------------------------===//

namespace sparsecomp::sparse_iter {

/// A bare identifier: `x86_64`, `avx2`, `sse4.2`, `m16n8k16`.
static FailureOr<StringAttr> parseKeyword(AsmParser &parser) {
  StringRef word;
  if (parser.parseKeyword(&word))
    return failure();
  return StringAttr::get(parser.getContext(), word);
}

/// `[a, b, ...]` of bare identifiers, possibly empty.
static FailureOr<ArrayAttr> parseKeywordList(AsmParser &parser) {
  SmallVector<Attribute> words;
  auto one = [&]() -> ParseResult {
    FailureOr<StringAttr> word = parseKeyword(parser);
    if (failed(word))
      return failure();
    words.push_back(*word);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, one))
    return failure();
  return ArrayAttr::get(parser.getContext(), words);
}

static void printKeywordList(AsmPrinter &printer, ArrayAttr words) {
  printer << '[';
  llvm::interleaveComma(words, printer, [&](Attribute word) {
    printer << cast<StringAttr>(word).getValue();
  });
  printer << ']';
}

/// A compute capability, `sm_90`.
static FailureOr<int64_t> parseSm(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef word;
  int64_t sm = 0;
  if (parser.parseOptionalKeyword(&word) || !word.consume_front("sm_") ||
      word.getAsInteger(10, sm))
    return parser.emitError(loc, "expected a compute capability such as sm_90");
  return sm;
}

} // namespace sparsecomp::sparse_iter

#include "Dialect.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "Attrs.cpp.inc"
#define GET_OP_CLASSES
#include "Ops.cpp.inc"

void SparseIterDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "Attrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "Ops.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attribute verifiers
//===----------------------------------------------------------------------===//

/// The `params` of `attr` hold an `array<what: ...>`.
template <typename ArrayT>
static LogicalResult verifyArray(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef attr, Attribute params,
                                 StringRef what) {
  if (!isa<ArrayT>(params))
    return emitError() << attr << " params must be an array<" << what
                       << ": ...>, got " << params;
  return success();
}

LogicalResult SparsityAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringAttr, Attribute params, FloatAttr) {
  return verifyArray<DenseI64ArrayAttr>(emitError, "sparsity", params, "i64");
}

LogicalResult PartAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringAttr, Attribute params, LayoutAttr) {
  return verifyArray<DenseI64ArrayAttr>(emitError, "part", params, "i64");
}

LogicalResult
SparsifierAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       StringAttr, Attribute params) {
  return verifyArray<DenseF64ArrayAttr>(emitError, "sparsifier", params, "f64");
}

//===----------------------------------------------------------------------===//
// Folders
//===----------------------------------------------------------------------===//

/// `set(unset(y))` -> `y` and `unset(set(x))` -> `x` when the types agree; a
/// round trip that changes the encoding is a conversion and stays.
template <typename Inner, typename Outer>
static OpFoldResult foldRoundTrip(Outer op) {
  if (auto inner = op.getSource().template getDefiningOp<Inner>())
    if (inner.getSource().getType() == op.getType())
      return inner.getSource();
  return {};
}

OpFoldResult SetEncodingOp::fold(FoldAdaptor) {
  if (getSource().getType() == getType())
    return getSource();
  return foldRoundTrip<UnsetEncodingOp>(*this);
}

OpFoldResult UnsetEncodingOp::fold(FoldAdaptor) {
  return foldRoundTrip<SetEncodingOp>(*this);
}

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

/// Registers and loads sparse_iter in `context` (an MlirContext of the C API,
/// as the Python bindings' Context._CAPIPtr holds it). Loading twice is a
/// no-op.
extern "C" __attribute__((visibility("default"))) void
sparsecompRegisterSparseIter(MlirContext context) {
  MLIRContext *ctx = unwrap(context);
  DialectRegistry registry;
  registry.insert<SparseIterDialect>();
  ctx->appendDialectRegistry(registry);
  ctx->getOrLoadDialect<SparseIterDialect>();
}
