//===- Einsum.cpp - einsum as transposes, reductions and one matmul -------===//
//
// Shared by the ONNX and TorchScript importers. Labels repeated in one
// operand take a diagonal (identity mask + sum); labels in one operand
// only and not in the output are summed away; the rest becomes one batched
// graph.matmul of [batch..., free, contracted] x [batch..., contracted,
// free] between transposes and reshapes.
//
//===----------------------------------------------------------------------===//

#include "tessera/Dialect/Graph/IR/Graph.h"
#include "tessera/Dialect/Graph/IR/OpBuilding.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

#include <cctype>
#include <string>

using namespace mlir;

namespace tessera::graph {
namespace {

using Ints = SmallVector<int64_t>;

Ints shapeOf(Value v) { return Ints(cast<RankedTensorType>(v.getType()).getShape()); }
Type elementTypeOf(Value v) { return cast<RankedTensorType>(v.getType()).getElementType(); }
int64_t rankOf(Value v) { return cast<RankedTensorType>(v.getType()).getRank(); }

/// Creates OpTy with an inferred result type, verified and folded.
template <typename OpTy, typename... Args>
FailureOr<Value> infer(OpBuilder &b, Location loc, Args &&...args) {
  auto op = OpTy::create(b, loc, placeholderResultType(b.getContext()),
                         std::forward<Args>(args)...);
  return finishCreatedOp(b, op.getOperation());
}

} // namespace

FailureOr<Value> createEinsum(OpBuilder &b, Location loc, StringRef equation,
                               ValueRange inputs) {
  std::string eq;
  for (char c : equation)
    if (c != ' ')
      eq += c;
  size_t arrow = eq.find("->");
  std::string lhsTerms = eq.substr(0, arrow);
  SmallVector<StringRef> termRefs;
  StringRef(lhsTerms).split(termRefs, ',');
  if (termRefs.size() != inputs.size() || termRefs.size() > 2)
    return emitError(loc) << "Einsum: Einsum '" << eq
                          << "' is not supported yet (Tessera handles one or two operands, "
                          << inputs.size() << " given)";
  // Expand "..." into fresh labels, aligned at the right.
  std::string used = eq;
  std::string fresh;
  for (char c = 'A'; fresh.size() < 16 && c <= 'z'; ++c)
    if (std::isalpha(c) && used.find(c) == std::string::npos)
      fresh += c;
  SmallVector<std::string> terms;
  SmallVector<Value> operands;
  std::string allLabels; // before diagonals: what implicit mode counts
  size_t ellipsisRank = 0;
  for (auto [i, t] : llvm::enumerate(termRefs)) {
    std::string term = t.str();
    size_t pos = term.find("...");
    if (pos != std::string::npos) {
      int64_t named = static_cast<int64_t>(term.size()) - 3;
      int64_t k = rankOf(inputs[i]) - named;
      if (k < 0 || k > static_cast<int64_t>(fresh.size()))
        return emitError(loc) << "Einsum: term '" << t << "' does not match operand rank "
                         << rankOf(inputs[i]);
      ellipsisRank = std::max<size_t>(ellipsisRank, k);
      // Right-aligned across operands: the last k fresh labels.
      term = term.substr(0, pos) + fresh.substr(fresh.size() - k) +
             term.substr(pos + 3);
    }
    if (static_cast<int64_t>(term.size()) != rankOf(inputs[i]))
      return emitError(loc) << "Einsum: term '" << t << "' does not match operand rank "
                       << rankOf(inputs[i]);
    // A label repeated in one operand takes its diagonal: mask with the
    // identity over the two dims, then sum the second away.
    Value v = inputs[i];
    allLabels += term;
    for (size_t a = 0; a < term.size(); ++a) {
      size_t second;
      while ((second = term.find(term[a], a + 1)) != std::string::npos) {
        Ints shape = shapeOf(v);
        if (shape[a] != shape[second])
          return emitError(loc) << "Einsum: label '" << term[a] << "' of term '" << t
                           << "' indexes dims of sizes " << shape[a] << " and "
                           << shape[second];
        Ints maskShape(shape.size(), 1);
        maskShape[a] = maskShape[second] = shape[a];
        SmallVector<bool> eye;
        for (int64_t r = 0; r < shape[a]; ++r)
          for (int64_t c = 0; c < shape[a]; ++c)
            eye.push_back(r == c);
        Value mask = ConstantOp::create(
            b, loc, DenseElementsAttr::get(RankedTensorType::get(maskShape, b.getI1Type()),
                                           ArrayRef<bool>(eye)));
        Value zero = createSplatConstant(b, loc, elementTypeOf(v), {}, 0);
        TESSERA_ASSIGN_OR_FAIL(masked, infer<SelectOp>(b, loc, mask, v, zero));
        TESSERA_ASSIGN_OR_FAIL(
            diag, infer<ReduceSumOp>(b, loc, masked, b.getDenseI64ArrayAttr({int64_t(second)}),
                                     b.getBoolAttr(false)));
        v = diag;
        term.erase(second, 1);
      }
    }
    terms.push_back(term);
    operands.push_back(v);
  }
  std::string output;
  if (arrow != std::string::npos) {
    output = eq.substr(arrow + 2);
    size_t pos = output.find("...");
    if (pos != std::string::npos)
      output = output.substr(0, pos) +
               fresh.substr(fresh.size() - ellipsisRank) + output.substr(pos + 3);
  } else {
    // Implicit mode: labels seen once, in alphabetical order.
    const std::string &all = allLabels;
    std::string once;
    for (char c : all)
      if (llvm::count(all, c) == 1)
        once += c;
    llvm::sort(once);
    output = once;
  }
  for (auto [o, c] : llvm::enumerate(output)) {
    bool known = llvm::any_of(terms, [&](const std::string &t) {
      return t.find(c) != std::string::npos;
    });
    if (!known || output.find(c, o + 1) != std::string::npos)
      return emitError(loc) << "Einsum: output label '" << c
                       << "' must appear once in the output and in an operand";
  }

  // Sum away labels that appear in only one operand and not in the output.
  SmallVector<Value> ops;
  for (auto [i, term] : llvm::enumerate(terms)) {
    Value v = operands[i];
    Ints axes;
    std::string kept;
    for (auto [d, c] : llvm::enumerate(term)) {
      bool elsewhere = output.find(c) != std::string::npos;
      for (auto [j, other] : llvm::enumerate(terms))
        elsewhere |= j != i && other.find(c) != std::string::npos;
      if (elsewhere)
        kept += c;
      else
        axes.push_back(d);
    }
    if (!axes.empty()) {
      TESSERA_ASSIGN_OR_FAIL(r, infer<ReduceSumOp>(b, loc, v, b.getDenseI64ArrayAttr(axes),
                                                   b.getBoolAttr(false)));
      v = r;
    }
    terms[i] = kept;
    ops.push_back(v);
  }
  auto permuteTo = [&](Value v, const std::string &from,
                       const std::string &to) -> FailureOr<Value> {
    Ints perm;
    for (char c : to)
      perm.push_back(from.find(c));
    return createTranspose(b, loc, v, perm);
  };
  if (ops.size() == 1) {
    return permuteTo(ops[0], terms[0], output);
  }

  const std::string &l = terms[0], &r = terms[1];
  std::string batch, contract, lfree, rfree;
  for (char c : l) {
    bool inR = r.find(c) != std::string::npos;
    bool inOut = output.find(c) != std::string::npos;
    (inR ? (inOut ? batch : contract) : lfree) += c;
  }
  for (char c : r)
    if (l.find(c) == std::string::npos)
      rfree += c;
  Ints ls = shapeOf(ops[0]), rs = shapeOf(ops[1]);
  auto dimOf = [](const std::string &term, const Ints &shape, char c) {
    return shape[term.find(c)];
  };
  Ints lBatch, rBatch, outBatch, lfreeDims, rfreeDims;
  int64_t lsize = 1, rsize = 1, ksize = 1;
  for (char c : batch) {
    int64_t sl = dimOf(l, ls, c), sr = dimOf(r, rs, c);
    if (sl != sr && sl != 1 && sr != 1)
      return emitError(loc) << "Einsum: label '" << c << "' has sizes " << sl << " and " << sr;
    lBatch.push_back(sl);
    rBatch.push_back(sr);
    outBatch.push_back(std::max(sl, sr));
  }
  for (char c : contract) {
    int64_t sl = dimOf(l, ls, c), sr = dimOf(r, rs, c);
    if (sl != sr)
      return emitError(loc) << "Einsum: contracted label '" << c << "' has sizes " << sl
                            << " and " << sr;
    ksize *= sl;
  }
  for (char c : lfree) {
    lfreeDims.push_back(dimOf(l, ls, c));
    lsize *= lfreeDims.back();
  }
  for (char c : rfree) {
    rfreeDims.push_back(dimOf(r, rs, c));
    rsize *= rfreeDims.back();
  }
  TESSERA_ASSIGN_OR_FAIL(lt, permuteTo(ops[0], l, batch + lfree + contract));
  TESSERA_ASSIGN_OR_FAIL(rt, permuteTo(ops[1], r, batch + contract + rfree));
  Ints lShape = lBatch, rShape = rBatch;
  lShape.append({lsize, ksize});
  rShape.append({ksize, rsize});
  TESSERA_ASSIGN_OR_FAIL(lm, createReshape(b, loc, lt, lShape));
  TESSERA_ASSIGN_OR_FAIL(rm, createReshape(b, loc, rt, rShape));
  TESSERA_ASSIGN_OR_FAIL(mm, infer<MatmulOp>(b, loc, lm, rm));
  Ints resultShape = outBatch;
  resultShape.append(lfreeDims.begin(), lfreeDims.end());
  resultShape.append(rfreeDims.begin(), rfreeDims.end());
  TESSERA_ASSIGN_OR_FAIL(res, createReshape(b, loc, mm, resultShape));
  return permuteTo(res, batch + lfree + rfree, output);
}

} // namespace tessera::graph
