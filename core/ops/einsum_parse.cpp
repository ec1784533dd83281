// einsum's equation parser (einsum_parse.h): split the terms, expand "..." to reserved
// labels, check each term against its operand's rank, and find the output labels.
#include "core/ops/einsum_parse.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace kiln::einsum_detail {
namespace {

// `term` with its "..." (if any) replaced by the labels of the last `covered` of the
// `ellipsis_dims` broadcast dims, where covered = ndim - (letters in term); ndim < 0 (the
// output) covers them all.
std::string expand_ellipsis(const std::string& term, int64_t ndim, int64_t ellipsis_dims,
                            const std::string& eq) {
  const size_t at = term.find("...");
  if (at == std::string::npos) return term;
  KILN_CHECK(term.find("...", at + 3) == std::string::npos, "einsum: more than one '...' in a term of '", eq,
             "'");
  std::string dims;
  const int64_t covered = ndim < 0 ? ellipsis_dims : ndim - static_cast<int64_t>(term.size() - 3);
  KILN_CHECK(covered >= 0, "einsum: operand has fewer dimensions than subscripts in '", eq, "'");
  for (int64_t i = ellipsis_dims - covered; i < ellipsis_dims; ++i)
    dims.push_back(static_cast<char>(kEllipsisLabel + i));
  return term.substr(0, at) + dims + term.substr(at + 3);
}

// `term` without its first "...".
std::string without_ellipsis(const std::string& term) {
  const size_t at = term.find("...");
  return at == std::string::npos ? term : term.substr(0, at) + term.substr(at + 3);
}

void check_letters(const std::string& term, const std::string& eq) {
  for (char c : term) {
    KILN_CHECK(std::isalpha(static_cast<unsigned char>(c)), "einsum: invalid subscript '", std::string(1, c),
               "' in '", eq, "' (subscripts are letters, plus '...')");
  }
}

// The comma-separated terms of the left-hand side.
std::vector<std::string> split_terms(const std::string& lhs) {
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return terms;
}

// The labels of operand i's term, checked against its rank.
std::string label_operand(const std::string& term, size_t i, const Tensor& operand, int64_t ellipsis_dims,
                          const std::string& equation) {
  check_letters(without_ellipsis(term), equation);
  const std::string labels = expand_ellipsis(term, operand.dim(), ellipsis_dims, equation);
  KILN_CHECK(static_cast<int64_t>(labels.size()) == operand.dim(), "einsum: term '", term, "' of '", equation,
             "' has ", labels.size(), " subscripts but operand ", i, " has ", operand.dim(),
             " dimensions (shape ", operand.sizes(), ")");
  for (size_t p = 0; p < labels.size(); ++p) {
    KILN_CHECK(labels.find(labels[p], p + 1) == std::string::npos, "einsum: subscript '",
               std::string(1, labels[p]), "' repeats within operand ", i, " of '", equation,
               "' (diagonals are not supported)");
  }
  return labels;
}

// The explicit output's labels: each once, each in some operand.
std::string label_output(const std::string& rhs, const std::vector<std::string>& inputs,
                         int64_t ellipsis_dims, const std::string& equation) {
  check_letters(without_ellipsis(rhs), equation);
  const std::string output = expand_ellipsis(rhs, -1, ellipsis_dims, equation);
  for (char c : output) {
    bool found = false;
    for (const std::string& labels : inputs) found |= labels.find(c) != std::string::npos;
    KILN_CHECK(found, "einsum: output subscript '", std::string(1, c), "' of '", equation,
               "' appears in no operand");
    KILN_CHECK(std::count(output.begin(), output.end(), c) == 1, "einsum: output subscript '",
               std::string(1, c), "' repeats in '", equation, "'");
  }
  return output;
}

// The implicit output: the broadcast dims first, then the letters used exactly once, sorted.
std::string implicit_output(const std::vector<std::string>& inputs, int64_t ellipsis_dims) {
  std::map<char, int> count;
  for (const std::string& labels : inputs)
    for (char c : labels) ++count[c];
  std::string output;
  for (int64_t i = 0; i < ellipsis_dims; ++i) output.push_back(static_cast<char>(kEllipsisLabel + i));
  for (const auto& [c, n] : count)
    if (n == 1 && std::isalpha(static_cast<unsigned char>(c))) output.push_back(c);
  return output;
}

}  // namespace

EinsumLabels parse_einsum(const std::string& equation, const std::vector<Tensor>& operands) {
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq.push_back(c);
  const size_t arrow = eq.find("->");
  const std::vector<std::string> terms = split_terms(eq.substr(0, arrow));
  KILN_CHECK(terms.size() == operands.size(), "einsum: '", equation, "' has ", terms.size(), " terms but ",
             operands.size(), " operands were given");
  // "..." stands for the largest number of broadcast dims among the operands.
  int64_t ellipsis_dims = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_CHECK(operands[i].defined(), "einsum: operand ", i, " is undefined");
    if (terms[i].find("...") != std::string::npos)
      ellipsis_dims = std::max(ellipsis_dims, operands[i].dim() - static_cast<int64_t>(terms[i].size() - 3));
  }
  EinsumLabels labels;
  for (size_t i = 0; i < terms.size(); ++i)
    labels.inputs.push_back(label_operand(terms[i], i, operands[i], ellipsis_dims, equation));
  labels.output = arrow != std::string::npos
                      ? label_output(eq.substr(arrow + 2), labels.inputs, ellipsis_dims, equation)
                      : implicit_output(labels.inputs, ellipsis_dims);
  return labels;
}

}  // namespace kiln::einsum_detail
