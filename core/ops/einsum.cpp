// einsum, lowered to sums, permutes, reshapes and bmm (STYLE 3: a composite, so its
// gradient comes from those ops).
//
// The equation is parsed into one subscript string per operand and one for the output
// ("..." becomes reserved upper-case-free letters for the broadcast dims). Then:
//   1. each operand sums out the subscripts no other operand and not the output uses;
//   2. operands are contracted left to right: for A and B, the shared subscripts still
//      needed later are batch dims, the other shared ones are contracted; A is permuted to
//      [batch, A-only, contracted] and B to [batch, contracted, B-only], both reshaped to
//      3-d (size-1 dims broadcast by expand first) and multiplied with one bmm;
//   3. the result sums out what the output does not keep and is permuted into its order.
// Under autocast einsum is a lower-precision op (core/autocast.h): the operands are cast
// once at the entry and the body runs with autocast off, so its inner sums stay in the
// autocast dtype instead of bouncing through float32 on their way to bmm.
#include <algorithm>
#include <map>
#include <numeric>

#include "core/autocast.h"
#include "core/ops/elementwise.h"
#include "core/ops/matmul.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"

namespace kiln {
namespace {

// A tensor with one subscript character per dim.
struct Labeled {
  Tensor t;
  std::string labels;
};

// Letters standing for the dims covered by "..." (never valid in a user's equation).
constexpr char kEllipsisFirst = '0';

std::string expand_ellipsis(const std::string& term, int64_t ndim, int64_t ellipsis_dims, const std::string& eq) {
  const size_t at = term.find("...");
  if (at == std::string::npos) return term;
  KILN_CHECK(term.find("...", at + 3) == std::string::npos, "einsum: more than one '...' in a term of '", eq, "'");
  std::string dims;
  const int64_t covered = ndim < 0 ? ellipsis_dims : ndim - static_cast<int64_t>(term.size() - 3);
  KILN_CHECK(covered >= 0, "einsum: operand has fewer dimensions than subscripts in '", eq, "'");
  for (int64_t i = ellipsis_dims - covered; i < ellipsis_dims; ++i) dims.push_back(static_cast<char>(kEllipsisFirst + i));
  return term.substr(0, at) + dims + term.substr(at + 3);
}

void check_letters(const std::string& term, const std::string& eq) {
  for (char c : term) {
    KILN_CHECK(std::isalpha(static_cast<unsigned char>(c)), "einsum: invalid subscript '", std::string(1, c),
               "' in '", eq, "' (subscripts are letters, plus '...')");
  }
}

// Sums out of `x` every label for which keep(label) is false.
Labeled sum_out(Labeled x, const std::function<bool(char)>& keep) {
  std::vector<int64_t> dims;
  std::string kept;
  for (size_t d = 0; d < x.labels.size(); ++d) {
    if (keep(x.labels[d])) kept.push_back(x.labels[d]);
    else dims.push_back(static_cast<int64_t>(d));
  }
  if (!dims.empty()) x.t = sum(x.t, dims);
  x.labels = kept;
  return x;
}

// Permutes x into the order of `order` (a permutation of x.labels).
Tensor arrange(const Labeled& x, const std::string& order) {
  std::vector<int64_t> perm;
  for (char c : order) perm.push_back(static_cast<int64_t>(x.labels.find(c)));
  return x.t.permute(perm);
}

int64_t size_of(const Labeled& x, char c) { return x.t.sizes()[x.labels.find(c)]; }

Labeled contract(const Labeled& a, const Labeled& b, const std::string& needed_later, const std::string& eq) {
  std::string batch, contracted, a_only, b_only;
  for (char c : a.labels) {
    if (b.labels.find(c) == std::string::npos) a_only.push_back(c);
    else if (needed_later.find(c) != std::string::npos) batch.push_back(c);
    else contracted.push_back(c);
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos) b_only.push_back(c);
  // Shared dims must agree or broadcast from 1.
  std::map<char, int64_t> size;
  for (char c : batch + contracted) {
    const int64_t sa = size_of(a, c), sb = size_of(b, c);
    KILN_CHECK(sa == sb || sa == 1 || sb == 1, "einsum: subscript '", std::string(1, c), "' has size ", sa,
               " in one operand and ", sb, " in another in '", eq, "'");
    size[c] = std::max(sa, sb);
  }
  auto shape_of = [&](const Labeled& x, const std::string& order) {
    std::vector<int64_t> s;
    for (char c : order) s.push_back(size.count(c) ? size[c] : size_of(x, c));
    return s;
  };
  auto product = [&](const Labeled& x, const std::string& order) {
    int64_t p = 1;
    for (int64_t s : shape_of(x, order)) p *= s;
    return p;
  };
  const std::string a_order = batch + a_only + contracted, b_order = batch + contracted + b_only;
  const Tensor a3 = arrange(a, a_order).expand(shape_of(a, a_order))
                        .reshape({product(a, batch), product(a, a_only), product(a, contracted)});
  const Tensor b3 = arrange(b, b_order).expand(shape_of(b, b_order))
                        .reshape({product(b, batch), product(b, contracted), product(b, b_only)});
  std::vector<int64_t> out_shape = shape_of(a, batch);
  for (int64_t s : shape_of(a, a_only)) out_shape.push_back(s);
  for (int64_t s : shape_of(b, b_only)) out_shape.push_back(s);
  return {bmm(a3, b3).reshape(out_shape), batch + a_only + b_only};
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  if (autocast_enabled()) {
    std::vector<Tensor> cast;
    for (const Tensor& t : operands) cast.push_back(autocast_input(t, AutocastPolicy::LowerPrecision));
    const AutocastGuard off(autocast_state().dtype, /*enabled=*/false);
    return einsum(equation, cast);
  }
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  KILN_CHECK(terms.size() == operands.size(), "einsum: '", equation, "' has ", terms.size(), " terms but ",
             operands.size(), " operands were given");
  // Expand "..." to the largest number of broadcast dims among the operands.
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_CHECK(operands[i].defined(), "einsum: operand ", i, " is undefined");
    if (terms[i].find("...") != std::string::npos)
      ellipsis_dims = std::max(ellipsis_dims, operands[i].dim() - static_cast<int64_t>(terms[i].size() - 3));
  }
  std::vector<Labeled> inputs;
  for (size_t i = 0; i < terms.size(); ++i) {
    std::string term = terms[i];
    const std::string letters_only = term.find("...") == std::string::npos ? term : term.substr(0, term.find("...")) + term.substr(term.find("...") + 3);
    check_letters(letters_only, equation);
    term = expand_ellipsis(term, operands[i].dim(), ellipsis_dims, equation);
    KILN_CHECK(static_cast<int64_t>(term.size()) == operands[i].dim(), "einsum: term '", terms[i], "' of '",
               equation, "' has ", term.size(), " subscripts but operand ", i, " has ", operands[i].dim(),
               " dimensions (shape ", operands[i].sizes(), ")");
    for (size_t p = 0; p < term.size(); ++p) {
      KILN_CHECK(term.find(term[p], p + 1) == std::string::npos, "einsum: subscript '", std::string(1, term[p]),
                 "' repeats within operand ", i, " of '", equation, "' (diagonals are not supported)");
    }
    inputs.push_back({operands[i], term});
  }
  std::string output;
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    const std::string rhs_letters = rhs.find("...") == std::string::npos ? rhs : rhs.substr(0, rhs.find("...")) + rhs.substr(rhs.find("...") + 3);
    check_letters(rhs_letters, equation);
    output = expand_ellipsis(rhs, -1, ellipsis_dims, equation);
    for (char c : output) {
      bool found = false;
      for (const Labeled& x : inputs) found |= x.labels.find(c) != std::string::npos;
      KILN_CHECK(found, "einsum: output subscript '", std::string(1, c), "' of '", equation, "' appears in no operand");
      KILN_CHECK(std::count(output.begin(), output.end(), c) == 1, "einsum: output subscript '", std::string(1, c),
                 "' repeats in '", equation, "'");
    }
  } else {
    // Implicit form: broadcast dims first, then the letters used exactly once, sorted.
    std::map<char, int> count;
    for (const Labeled& x : inputs)
      for (char c : x.labels) ++count[c];
    for (int64_t i = 0; i < ellipsis_dims; ++i) output.push_back(static_cast<char>(kEllipsisFirst + i));
    for (const auto& [c, n] : count)
      if (n == 1 && std::isalpha(static_cast<unsigned char>(c))) output.push_back(c);
  }
  // Labels a later step still needs: the output's and those of the operands after i.
  auto needed_after = [&](size_t i) {
    std::string needed = output;
    for (size_t j = i + 1; j < inputs.size(); ++j) needed += inputs[j].labels;
    return needed;
  };
  auto needed_except = [&](size_t i) {
    std::string needed = output;
    for (size_t j = 0; j < inputs.size(); ++j)
      if (j != i) needed += inputs[j].labels;
    return needed;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string needed = needed_except(i);
    inputs[i] = sum_out(inputs[i], [&](char c) { return needed.find(c) != std::string::npos; });
  }
  Labeled result = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) result = contract(result, inputs[i], needed_after(i), equation);
  result = sum_out(result, [&](char c) { return output.find(c) != std::string::npos; });
  return arrange(result, output);
}

}  // namespace kiln
