#include "src/meter/formulas/nnls.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kwatt::meter::internal {
namespace {

// Least squares on the columns `passive` of `a` (Householder QR, column by column); a column whose
// pivot is negligible against the largest is left out (its value 0). Returns one value per
// passive column.
std::vector<double> SubsetLeastSquares(const Matrix& a, const std::vector<double>& b,
                                       const std::vector<size_t>& passive) {
  const size_t m = a.rows, k = passive.size();
  // Column-major copy of the passive columns, and of b.
  std::vector<double> q(m * k);
  for (size_t j = 0; j < k; ++j) {
    for (size_t i = 0; i < m; ++i) q[j * m + i] = a.at(i, passive[j]);
  }
  std::vector<double> rhs(b);
  std::vector<double> diagonal(k, 0);
  std::vector<bool> used(k, false);
  double largest = 0;
  size_t rank_row = 0;  // rows consumed by reflections so far
  for (size_t j = 0; j < k && rank_row < m; ++j) {
    double* col = &q[j * m];
    double norm = 0;
    for (size_t i = rank_row; i < m; ++i) norm += col[i] * col[i];
    norm = std::sqrt(norm);
    largest = std::max(largest, norm);
    if (norm <= 1e-10 * std::max(largest, 1e-300)) continue;  // dependent on earlier columns
    double alpha = col[rank_row] > 0 ? -norm : norm;
    // v = col - alpha e; H = I - 2 v v^T / (v^T v)
    std::vector<double> v(col + rank_row, col + m);
    v[0] -= alpha;
    double vv = 0;
    for (double x : v) vv += x * x;
    auto reflect = [&](double* y) {
      double dot = 0;
      for (size_t i = 0; i < v.size(); ++i) dot += v[i] * y[rank_row + i];
      double f = 2 * dot / vv;
      for (size_t i = 0; i < v.size(); ++i) y[rank_row + i] -= f * v[i];
    };
    if (vv > 0) {
      for (size_t l = j; l < k; ++l) reflect(&q[l * m]);
      reflect(rhs.data());
    }
    diagonal[j] = q[j * m + rank_row];
    used[j] = true;
    // Row rank_row of R is this column's; remember which row it took.
    q[j * m + rank_row] = diagonal[j];
    ++rank_row;
  }
  // Back substitution over the used columns, in reverse.
  std::vector<double> z(k, 0);
  std::vector<size_t> row_of(k, 0);
  size_t r = 0;
  for (size_t j = 0; j < k; ++j) {
    if (used[j]) row_of[j] = r++;
  }
  for (size_t jj = k; jj-- > 0;) {
    if (!used[jj]) continue;
    size_t row = row_of[jj];
    double sum = rhs[row];
    for (size_t l = jj + 1; l < k; ++l) {
      if (used[l]) sum -= q[l * m + row] * z[l];
    }
    z[jj] = sum / q[jj * m + row];
  }
  return z;
}

}  // namespace

Result<NnlsResult> SolveNnls(const Matrix& a, const std::vector<double>& b) {
  const size_t m = a.rows, n = a.columns;
  if (b.size() != m || a.values.size() != m * n) {
    return Status::InvalidArgument("NNLS: the matrix and the right-hand side disagree in size");
  }
  for (double v : a.values) {
    if (!std::isfinite(v)) return Status::InvalidArgument("NNLS: a value is not finite");
  }
  for (double v : b) {
    if (!std::isfinite(v)) return Status::InvalidArgument("NNLS: a value is not finite");
  }
  NnlsResult result;
  result.x.assign(n, 0);
  if (m == 0 || n == 0) {
    double norm = 0;
    for (double v : b) norm += v * v;
    result.residual_norm = std::sqrt(norm);
    return result;
  }
  // Unit-norm columns.
  Matrix s = a;
  std::vector<double> scale(n, 0);
  for (size_t j = 0; j < n; ++j) {
    double norm = 0;
    for (size_t i = 0; i < m; ++i) norm += a.at(i, j) * a.at(i, j);
    norm = std::sqrt(norm);
    scale[j] = norm;
    for (size_t i = 0; i < m; ++i) s.at(i, j) = norm > 0 ? a.at(i, j) / norm : 0;
  }
  std::vector<double> x(n, 0), w(n, 0), residual(b);
  std::vector<bool> in_passive(n, false);
  auto gradient = [&]() {
    for (size_t i = 0; i < m; ++i) {
      double ax = 0;
      for (size_t j = 0; j < n; ++j) ax += s.at(i, j) * x[j];
      residual[i] = b[i] - ax;
    }
    for (size_t j = 0; j < n; ++j) {
      double dot = 0;
      for (size_t i = 0; i < m; ++i) dot += s.at(i, j) * residual[i];
      w[j] = dot;
    }
  };
  double bnorm = 0;
  for (double v : b) bnorm = std::max(bnorm, std::fabs(v));
  const double tolerance = 10 * std::numeric_limits<double>::epsilon() * double(std::max(m, n)) *
                           std::max(1.0, bnorm) * std::sqrt(double(n));
  gradient();
  const int max_iterations = int(3 * n + 10);
  while (result.iterations < max_iterations) {
    // The most promising variable not yet free.
    size_t best = n;
    double best_w = tolerance;
    for (size_t j = 0; j < n; ++j) {
      if (!in_passive[j] && scale[j] > 0 && w[j] > best_w) {
        best_w = w[j];
        best = j;
      }
    }
    if (best == n) break;
    ++result.iterations;
    in_passive[best] = true;
    for (int inner = 0; inner < int(3 * n + 10); ++inner) {
      std::vector<size_t> passive;
      for (size_t j = 0; j < n; ++j) {
        if (in_passive[j]) passive.push_back(j);
      }
      std::vector<double> zp = SubsetLeastSquares(s, b, passive);
      bool feasible = true;
      for (double v : zp) feasible = feasible && v > 0;
      if (feasible) {
        for (size_t j = 0; j < n; ++j) x[j] = 0;
        for (size_t p = 0; p < passive.size(); ++p) x[passive[p]] = zp[p];
        break;
      }
      // Step from x towards z as far as every passive value stays >= 0.
      double alpha = 1;
      for (size_t p = 0; p < passive.size(); ++p) {
        if (zp[p] <= 0) {
          size_t j = passive[p];
          double denominator = x[j] - zp[p];
          if (denominator > 0) alpha = std::min(alpha, x[j] / denominator);
        }
      }
      double largest = 0;
      for (size_t p = 0; p < passive.size(); ++p) {
        size_t j = passive[p];
        x[j] += alpha * (zp[p] - x[j]);
        largest = std::max(largest, std::fabs(x[j]));
      }
      // The values the step brought to zero (the one that set alpha at least) leave the set.
      for (size_t j : passive) {
        if (x[j] <= 1e-12 * largest) {
          x[j] = 0;
          in_passive[j] = false;
        }
      }
      bool any = false;
      for (size_t j = 0; j < n; ++j) any = any || in_passive[j];
      if (!any) break;
    }
    gradient();
  }
  for (size_t j = 0; j < n; ++j) result.x[j] = scale[j] > 0 ? std::max(0.0, x[j]) / scale[j] : 0;
  double norm = 0;
  for (size_t i = 0; i < m; ++i) {
    double ax = 0;
    for (size_t j = 0; j < n; ++j) ax += a.at(i, j) * result.x[j];
    norm += (b[i] - ax) * (b[i] - ax);
  }
  result.residual_norm = std::sqrt(norm);
  return result;
}

}  // namespace kwatt::meter::internal
