#include "src/meter/formulas/nnls.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kwatt::meter::internal::nnls_test {
namespace {

Matrix Make(size_t rows, size_t columns, std::vector<double> values) {
  Matrix m;
  m.rows = rows;
  m.columns = columns;
  m.values = std::move(values);
  return m;
}

double Residual(const Matrix& a, const std::vector<double>& b, const std::vector<double>& x) {
  double sum = 0;
  for (size_t i = 0; i < a.rows; ++i) {
    double ax = 0;
    for (size_t j = 0; j < a.columns; ++j) ax += a.at(i, j) * x[j];
    sum += (b[i] - ax) * (b[i] - ax);
  }
  return std::sqrt(sum);
}

// The best feasible least-squares residual, by trying every subset of free columns (normal
// equations solved by Gaussian elimination): the reference NNLS must reach.
double BruteForceResidual(const Matrix& a, const std::vector<double>& b) {
  const size_t n = a.columns;
  double best = Residual(a, b, std::vector<double>(n, 0));
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::vector<size_t> cols;
    for (size_t j = 0; j < n; ++j) {
      if (mask & (1u << j)) cols.push_back(j);
    }
    const size_t k = cols.size();
    std::vector<std::vector<double>> g(k, std::vector<double>(k + 1, 0));
    for (size_t p = 0; p < k; ++p) {
      for (size_t q = 0; q < k; ++q) {
        for (size_t i = 0; i < a.rows; ++i) g[p][q] += a.at(i, cols[p]) * a.at(i, cols[q]);
      }
      for (size_t i = 0; i < a.rows; ++i) g[p][k] += a.at(i, cols[p]) * b[i];
    }
    bool singular = false;
    for (size_t p = 0; p < k && !singular; ++p) {
      size_t pivot = p;
      for (size_t r = p + 1; r < k; ++r) {
        if (std::fabs(g[r][p]) > std::fabs(g[pivot][p])) pivot = r;
      }
      std::swap(g[p], g[pivot]);
      if (std::fabs(g[p][p]) < 1e-12) {
        singular = true;
        break;
      }
      for (size_t r = 0; r < k; ++r) {
        if (r == p) continue;
        double f = g[r][p] / g[p][p];
        for (size_t c = p; c <= k; ++c) g[r][c] -= f * g[p][c];
      }
    }
    if (singular) continue;
    std::vector<double> x(n, 0);
    bool feasible = true;
    for (size_t p = 0; p < k; ++p) {
      x[cols[p]] = g[p][k] / g[p][p];
      feasible = feasible && x[cols[p]] >= 0;
    }
    if (feasible) best = std::min(best, Residual(a, b, x));
  }
  return best;
}

TEST(Nnls, RecoversAnExactNonNegativeSolution) {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> uniform(0, 1);
  Matrix a = Make(30, 3, {});
  for (size_t i = 0; i < 90; ++i) a.values.push_back(uniform(random));
  std::vector<double> truth = {1.5, 0.25, 3}, b(30);
  for (size_t i = 0; i < 30; ++i) {
    for (size_t j = 0; j < 3; ++j) b[i] += a.at(i, j) * truth[j];
  }
  Result<NnlsResult> r = SolveNnls(a, b);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(r->x[j], truth[j], 1e-9);
  EXPECT_LT(r->residual_norm, 1e-9);
}

TEST(Nnls, KeepsAVariableAtZeroWhereLeastSquaresWouldMakeItNegative) {
  // Identity, b = (1, -1): the unconstrained solution is (1, -1), NNLS's (1, 0).
  Result<NnlsResult> r = SolveNnls(Make(2, 2, {1, 0, 0, 1}), {1, -1});
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->x[0], 1, 1e-12);
  EXPECT_EQ(r->x[1], 0);
  EXPECT_NEAR(r->residual_norm, 1, 1e-12);
  // A falling line through (1,3), (2,2), (3,1) with intercept and slope >= 0: slope 0, intercept
  // the mean, 2.
  r = SolveNnls(Make(3, 2, {1, 1, 1, 2, 1, 3}), {3, 2, 1});
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->x[0], 2, 1e-12);
  EXPECT_EQ(r->x[1], 0);
}

TEST(Nnls, ReachesTheBestFeasibleResidualOnRandomProblems) {
  std::mt19937_64 random(11);
  std::normal_distribution<double> normal(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    size_t m = 5 + size_t(trial % 7), n = 1 + size_t(trial % 4);
    Matrix a = Make(m, n, {});
    for (size_t i = 0; i < m * n; ++i) a.values.push_back(normal(random));
    std::vector<double> b(m);
    for (double& v : b) v = normal(random);
    Result<NnlsResult> r = SolveNnls(a, b);
    ASSERT_TRUE(r.ok());
    for (double x : r->x) EXPECT_GE(x, 0);
    EXPECT_NEAR(r->residual_norm, BruteForceResidual(a, b), 1e-7) << "trial " << trial;
    // Karush-Kuhn-Tucker: the gradient vanishes on free variables and points out elsewhere.
    for (size_t j = 0; j < n; ++j) {
      double w = 0;
      for (size_t i = 0; i < m; ++i) {
        double ax = 0;
        for (size_t k = 0; k < n; ++k) ax += a.at(i, k) * r->x[k];
        w += a.at(i, j) * (b[i] - ax);
      }
      if (r->x[j] > 0) {
        EXPECT_NEAR(w, 0, 1e-7) << "trial " << trial;
      } else {
        EXPECT_LE(w, 1e-7) << "trial " << trial;
      }
    }
  }
}

TEST(Nnls, ColumnsOfVeryDifferentScales) {
  // An intercept column of ones beside rates of 1e9/s: watts = 20 + 2e-9 x cycles + 1e-7 x misses.
  std::mt19937_64 random(3);
  std::uniform_real_distribution<double> uniform(0, 1);
  Matrix a = Make(60, 3, {});
  std::vector<double> b;
  for (int i = 0; i < 60; ++i) {
    double cycles = 1e9 * (1 + 8 * uniform(random)), misses = 1e7 * uniform(random);
    a.values.insert(a.values.end(), {1, cycles, misses});
    b.push_back(20 + 2e-9 * cycles + 1e-7 * misses);
  }
  Result<NnlsResult> r = SolveNnls(a, b);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->x[0], 20, 1e-6);
  EXPECT_NEAR(r->x[1], 2e-9, 1e-15);
  EXPECT_NEAR(r->x[2], 1e-7, 1e-13);
}

TEST(Nnls, DegenerateInputs) {
  // No rows: zeros.
  Result<NnlsResult> r = SolveNnls(Make(0, 2, {}), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->x, (std::vector<double>{0, 0}));
  // A column of zeros gets 0; a column given twice: the fit is still the best one.
  r = SolveNnls(Make(3, 3, {0, 1, 1, 0, 2, 2, 0, 3, 3}), {2, 4, 6});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->x[0], 0);
  EXPECT_NEAR(r->x[1] + r->x[2], 2, 1e-9);
  EXPECT_LT(r->residual_norm, 1e-9);
  // b of zeros: x = 0.
  r = SolveNnls(Make(2, 2, {1, 2, 3, 4}), {0, 0});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->x, (std::vector<double>{0, 0}));
  // Wrong sizes and values that are not finite are refused.
  EXPECT_EQ(SolveNnls(Make(2, 1, {1, 2}), {1}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SolveNnls(Make(1, 1, {NAN}), {1}).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(SolveNnls(Make(1, 1, {1}), {INFINITY}).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace kwatt::meter::internal::nnls_test
