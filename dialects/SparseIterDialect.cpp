//===- SparseIterDialect.cpp - the sparse_iter dialect library -----------===//
//
// Attributes and ops come from sparse_iter.td through mlir-tblgen
// (dialects/build.py); this file adds what ODS leaves to C++: the dialect's
// initialize(), the readable attribute syntax, folders, and the entry point sparsecomp
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
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

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
// Numbers and bracketed lists in the readable attribute syntax
//===----------------------------------------------------------------------===//

/// The shortest text that reads back as exactly `value`: integers without a
/// decimal point (`16`), other numbers as Python's repr() writes them with
/// a `.` always before the exponent (`0.01`, `1.0e-05`), `inf`, `nan`.
/// sparsecomp.formats.literals.format_number is the host twin.
static std::string formatNumber(double value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value < 0 ? "-inf" : "inf";
  if (value == std::trunc(value) && std::fabs(value) < 0x1p53)
    return std::to_string(static_cast<long long>(value));
  // The shortest digits that read back exactly (std::to_chars picks, like
  // Python's repr, the closest such digits), laid out below like repr.
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf - 1, value,
                                 std::chars_format::scientific);
  (void)ec;
  *end = '\0';
  std::string text(buf);
  bool negative = text[0] == '-';
  if (negative)
    text.erase(0, 1);
  size_t e = text.find('e');
  std::string digits = text.substr(0, 1) + (e > 1 ? text.substr(2, e - 2) : "");
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  int exp10 = std::atoi(text.c_str() + e + 1);
  std::string out;
  if (exp10 < -4 || exp10 >= 16) {
    out = digits.substr(0, 1) + "." + (digits.size() > 1 ? digits.substr(1) : "0");
    char tail[8];
    std::snprintf(tail, sizeof tail, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += tail;
  } else {
    int point = exp10 + 1;
    int n = static_cast<int>(digits.size());
    if (point <= 0)
      out = "0." + std::string(-point, '0') + digits;
    else if (point >= n)
      out = digits + std::string(point - n, '0') + ".0";
    else
      out = digits.substr(0, point) + "." + digits.substr(point);
  }
  return negative ? "-" + out : out;
}

/// A number as formatNumber writes it (any MLIR integer or float literal).
static ParseResult parseNumber(AsmParser &parser, double &value) {
  bool negative = succeeded(parser.parseOptionalMinus());
  double sign = negative ? -1.0 : 1.0;
  if (succeeded(parser.parseOptionalKeyword("inf"))) {
    value = sign * HUGE_VAL;
    return success();
  }
  if (succeeded(parser.parseOptionalKeyword("nan"))) {
    value = std::nan("");
    return success();
  }
  uint64_t whole = 0;
  OptionalParseResult integer = parser.parseOptionalInteger(whole);
  if (integer.has_value()) {
    value = sign * static_cast<double>(whole);
    return *integer;
  }
  if (parser.parseFloat(value))
    return failure();
  value *= sign;
  return success();
}

/// A bare identifier into `word`; "expected <what>" where there is none.
static ParseResult parseWord(AsmParser &parser, StringRef &word, StringRef what) {
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOptionalKeyword(&word))
    return parser.emitError(loc, "expected ") << what;
  return success();
}

/// `[a, b, ...]` of integers if present; nothing is an empty list.
static ParseResult parseOptionalIntList(AsmParser &parser,
                                        SmallVectorImpl<int64_t> &values) {
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::OptionalSquare, [&]() -> ParseResult {
        return parser.parseInteger(values.emplace_back());
      });
}

static void printIntList(llvm::raw_ostream &os, ArrayRef<int64_t> values) {
  if (values.empty())
    return;
  os << '[';
  llvm::interleaveComma(values, os);
  os << ']';
}

//===----------------------------------------------------------------------===//
// #sparse_iter.sparsity<kind[params], density = d>
//===----------------------------------------------------------------------===//

Attribute SparsityAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  StringRef kind;
  SmallVector<int64_t> params;
  double density = 1.0;
  if (parser.parseLess() ||
      parseWord(parser, kind,
                "a sparsity kind, unquoted: unstructured, nm[n, m], "
                "block[r, c] or ragged (#sparse_iter.sparsity<ragged, density "
                "= 0.1>)") ||
      parseOptionalIntList(parser, params))
    return {};
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseKeyword("density") || parser.parseEqual() ||
       parseNumber(parser, density)))
    return {};
  if (parser.parseGreater())
    return {};
  return SparsityAttr::get(ctx, StringAttr::get(ctx, kind),
                           DenseI64ArrayAttr::get(ctx, params),
                           FloatAttr::get(Float64Type::get(ctx), density));
}

void SparsityAttr::print(AsmPrinter &printer) const {
  llvm::raw_ostream &os = printer.getStream();
  os << '<' << getKind().getValue();
  printIntList(os, getParams().asArrayRef());
  double density = getDensity().getValueAsDouble();
  if (density != 1.0)
    os << ", density = " << formatNumber(density);
  os << '>';
}

//===----------------------------------------------------------------------===//
// #sparse_iter.sparsifier<kind[params]>
//===----------------------------------------------------------------------===//

Attribute SparsifierAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  StringRef kind;
  SmallVector<double> params;
  if (parser.parseLess() || parseWord(parser, kind, "a sparsifier kind") ||
      parser.parseCommaSeparatedList(
          AsmParser::Delimiter::OptionalSquare, [&]() -> ParseResult {
            return parseNumber(parser, params.emplace_back());
          }) ||
      parser.parseGreater())
    return {};
  return SparsifierAttr::get(ctx, StringAttr::get(ctx, kind),
                             DenseF64ArrayAttr::get(ctx, params));
}

void SparsifierAttr::print(AsmPrinter &printer) const {
  llvm::raw_ostream &os = printer.getStream();
  os << '<' << getKind().getValue();
  ArrayRef<double> params = getParams().asArrayRef();
  if (!params.empty()) {
    os << '[';
    llvm::interleaveComma(params, os,
                          [&](double v) { os << formatNumber(v); });
    os << ']';
  }
  os << '>';
}

//===----------------------------------------------------------------------===//
// #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), ...}>
//===----------------------------------------------------------------------===//

namespace {
struct LevelFormat {
  StringLiteral name;
  unsigned minArgs, maxArgs;
};
} // namespace

static constexpr LevelFormat kLevelFormats[] = {
    {"dense", 0, 0},     {"dense_varied", 0, 0},     {"compressed", 0, 0},
    {"compressed_fixed", 0, 1}, {"loose_compressed", 0, 0},
    {"singleton", 0, 0}, {"structured", 2, 2},
};
static constexpr StringLiteral kLevelProperties[] = {"nonunique", "nonordered",
                                                     "soa"};
static constexpr StringLiteral kLevelFormatList =
    "dense, dense_varied, compressed, compressed_fixed, loose_compressed, "
    "singleton or structured[n, m]";

/// One level format, `name[args](properties)`, as its canonical text.
static ParseResult parseLevelFormat(AsmParser &parser, std::string &text) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef name;
  if (parseWord(parser, name, "a level format"))
    return failure();
  const LevelFormat *format = llvm::find_if(
      kLevelFormats, [&](const LevelFormat &f) { return f.name == name; });
  if (format == std::end(kLevelFormats))
    return parser.emitError(loc, "unknown level format '")
           << name << "'; expected " << kLevelFormatList;
  SmallVector<int64_t> args;
  if (parseOptionalIntList(parser, args))
    return failure();
  if (args.size() < format->minArgs || args.size() > format->maxArgs)
    return parser.emitError(loc, "level format '")
           << name << "' takes "
           << (format->maxArgs == 0   ? "no arguments"
               : format->minArgs == 2 ? "two arguments [n, m]"
                                      : "an optional width [w]")
           << ", got " << args.size();
  bool has[std::size(kLevelProperties)] = {};
  if (succeeded(parser.parseOptionalLParen())) {
    auto property = [&]() -> ParseResult {
      SMLoc propLoc = parser.getCurrentLocation();
      StringRef word;
      if (parseWord(parser, word, "a level property"))
        return failure();
      const StringLiteral *found = llvm::find(kLevelProperties, word);
      if (found == std::end(kLevelProperties))
        return parser.emitError(propLoc, "unknown level property '")
               << word << "'; expected nonunique, nonordered or soa";
      bool &seen = has[found - std::begin(kLevelProperties)];
      if (seen)
        return parser.emitError(propLoc, "level property '")
               << word << "' is given twice";
      seen = true;
      return success();
    };
    if (parser.parseCommaSeparatedList(property) || parser.parseRParen())
      return failure();
  }
  llvm::raw_string_ostream os(text);
  os << name;
  printIntList(os, args);
  SmallVector<StringRef> props;
  for (auto [i, p] : llvm::enumerate(kLevelProperties))
    if (has[i])
      props.push_back(p);
  if (!props.empty()) {
    os << '(';
    llvm::interleaveComma(props, os);
    os << ')';
  }
  return success();
}

/// `(i, j) -> (i : dense, j : compressed)`: the map and one format per level.
static ParseResult parseLevelMap(AsmParser &parser, AffineMap &map,
                                 SmallVectorImpl<Attribute> &levels) {
  MLIRContext *ctx = parser.getContext();
  SmallVector<std::pair<StringRef, AffineExpr>> dims;
  auto dim = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    StringRef name;
    if (parseWord(parser, name, "a dimension name"))
      return failure();
    if (llvm::any_of(dims, [&](auto &d) { return d.first == name; }))
      return parser.emitError(loc, "dimension '") << name << "' is named twice";
    dims.emplace_back(name, getAffineDimExpr(dims.size(), ctx));
    return success();
  };
  SmallVector<AffineExpr> results;
  auto level = [&]() -> ParseResult {
    std::string format;
    if (parser.parseAffineExpr(dims, results.emplace_back()) ||
        parser.parseColon() || parseLevelFormat(parser, format))
      return failure();
    levels.push_back(StringAttr::get(ctx, format));
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, dim) ||
      parser.parseArrow() ||
      parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, level))
    return failure();
  map = AffineMap::get(dims.size(), 0, results, ctx);
  return success();
}

static ParseResult parseBitWidth(AsmParser &parser, StringRef key,
                                 unsigned &width) {
  SMLoc loc = parser.getCurrentLocation();
  int64_t value; // signed: "-1" is reported as -1, not as 4294967295
  if (parser.parseInteger(value))
    return failure();
  if (!llvm::is_contained({0, 8, 16, 32, 64}, value))
    return parser.emitError(loc)
           << key << " must be 0, 8, 16, 32 or 64, got " << value;
  width = static_cast<unsigned>(value);
  return success();
}

Attribute LayoutAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  SMLoc start = parser.getCurrentLocation();
  SmallVector<Attribute> levels;
  AffineMap map;
  unsigned posWidth = 0, crdWidth = 0;
  StringAttr indexGroup = StringAttr::get(ctx), nmMetadata = StringAttr::get(ctx);
  llvm::StringSet<> seen;
  auto entry = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    StringRef key;
    if (parseWord(parser, key, "a layout key"))
      return failure();
    if (!seen.insert(key).second)
      return parser.emitError(loc, "layout key '") << key << "' is given twice";
    if (parser.parseEqual())
      return failure();
    if (key == "map")
      return parseLevelMap(parser, map, levels);
    if (key == "posWidth")
      return parseBitWidth(parser, key, posWidth);
    if (key == "crdWidth")
      return parseBitWidth(parser, key, crdWidth);
    if (key == "indexGroup") {
      std::string group;
      if (parser.parseString(&group))
        return failure();
      indexGroup = StringAttr::get(ctx, group);
      return success();
    }
    if (key == "nmMetadata") {
      StringRef word;
      if (parseWord(parser, word, "an n:m metadata layout"))
        return failure();
      nmMetadata = StringAttr::get(ctx, word);
      return success();
    }
    return parser.emitError(loc, "unknown layout key '")
           << key << "'; expected map, posWidth, crdWidth, indexGroup or "
           << "nmMetadata";
  };
  if (parser.parseLess())
    return {};
  // The positional form of earlier releases, `<["dense_fixed", ...], map, 32,
  // 32, {}>`, is no longer read: say what to write instead of "expected '{'".
  if (SMLoc square = parser.getCurrentLocation();
      succeeded(parser.parseOptionalLSquare()))
    return parser.emitError(square,
                            "the positional layout form '[levels], map, "
                            "widths' is no longer read; write "
                            "#sparse_iter.layout<{map = (i, j) -> (i : dense, "
                            "j : compressed), posWidth = 32, crdWidth = 32}> "
                            "(docs/dialect.md)"),
           Attribute();
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Braces, entry) ||
      parser.parseGreater())
    return {};
  if (!map)
    return parser.emitError(start, "a layout needs 'map = (dims) -> (levels)'"),
           Attribute();
  return parser.getChecked<LayoutAttr>(start, ctx, ArrayAttr::get(ctx, levels),
                                       map, posWidth, crdWidth, indexGroup,
                                       nmMetadata);
}

void LayoutAttr::print(AsmPrinter &printer) const {
  llvm::raw_ostream &os = printer.getStream();
  AffineMap map = getDimToLvl();
  os << "<{map = (";
  for (unsigned d = 0; d < map.getNumDims(); ++d)
    os << (d ? ", d" : "d") << d;
  os << ") -> (";
  for (auto [i, expr] : llvm::enumerate(map.getResults())) {
    if (i)
      os << ", ";
    expr.print(os);
    os << " : " << cast<StringAttr>(getLevels()[i]).getValue();
  }
  os << ')';
  if (getPosWidth())
    os << ", posWidth = " << getPosWidth();
  if (getCrdWidth())
    os << ", crdWidth = " << getCrdWidth();
  if (!getIndexGroup().empty()) {
    os << ", indexGroup = ";
    printer.printString(getIndexGroup().getValue());
  }
  if (!getNmMetadata().empty())
    os << ", nmMetadata = " << getNmMetadata().getValue();
  os << "}>";
}

LogicalResult LayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 ArrayAttr levels, AffineMap dimToLvl, unsigned,
                                 unsigned, StringAttr, StringAttr) {
  if (dimToLvl.getNumSymbols() != 0)
    return emitError() << "a layout's map takes no symbols";
  if (levels.size() != dimToLvl.getNumResults())
    return emitError() << "a layout needs one level format per map result, got "
                       << levels.size() << " for " << dimToLvl.getNumResults();
  if (!llvm::all_of(levels, [](Attribute a) { return isa<StringAttr>(a); }))
    return emitError() << "level formats must be strings";
  return success();
}

//===----------------------------------------------------------------------===//
// #sparse_iter.part<rule[params], #sparse_iter.layout<...>>
//===----------------------------------------------------------------------===//

Attribute PartAttr::parse(AsmParser &parser, Type) {
  MLIRContext *ctx = parser.getContext();
  StringRef rule;
  SmallVector<int64_t> params;
  LayoutAttr layout;
  if (parser.parseLess() || parseWord(parser, rule, "a part rule") ||
      parseOptionalIntList(parser, params) || parser.parseComma() ||
      parser.parseAttribute(layout) || parser.parseGreater())
    return {};
  return PartAttr::get(ctx, StringAttr::get(ctx, rule),
                       DenseI64ArrayAttr::get(ctx, params), layout);
}

void PartAttr::print(AsmPrinter &printer) const {
  printer.getStream() << '<' << getRule().getValue();
  printIntList(printer.getStream(), getParams().asArrayRef());
  printer << ", ";
  printer.printAttribute(getLayout());
  printer << '>';
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

/// Emits a remark at `location` (an MlirLocation of the C API). Passes written
/// in Python report with it: the bindings emit errors only.
extern "C" __attribute__((visibility("default"))) void
sparsecompEmitRemark(MlirLocation location, const char *message) {
  mlir::emitRemark(unwrap(location), message);
}
