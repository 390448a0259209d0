// Non-negative least squares (Lawson and Hanson, "Solving Least Squares Problems", 1974, ch. 23),
// for the smartwatts formula's models (smartwatts.h). Internal to the meter.
//
// Debian has no C or C++ NNLS library that fits: r-cran-nnls is R's (the same algorithm in
// Fortran, behind R), and Eigen 3.4's NNLS is in its "unsupported" modules; this is ~150 lines,
// tested in nnls_test.cc.
//
// Pure functions; thread-safe.
#ifndef KWATT_SRC_METER_FORMULAS_NNLS_H_
#define KWATT_SRC_METER_FORMULAS_NNLS_H_

#include <cstddef>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt::meter::internal {

// A dense matrix, row-major: rows x columns values.
struct Matrix {
  size_t rows = 0, columns = 0;
  std::vector<double> values;
  double& at(size_t r, size_t c) { return values[r * columns + c]; }
  double at(size_t r, size_t c) const { return values[r * columns + c]; }
};

struct NnlsResult {
  std::vector<double> x;     // the solution, every value >= 0
  double residual_norm = 0;  // ||A x - b||
  int iterations = 0;        // of the outer loop
};

// argmin ||A x - b|| subject to x >= 0. Columns are scaled to unit norm inside (so that counts of
// 1e9/s and a column of ones weigh alike) and the solution scaled back; a column of zeros gets 0.
// Where the columns are dependent, one minimiser among many is given (the passive set's least
// squares drops a column whose pivot vanishes). InvalidArgument when b's size is not A's rows or
// a value is not finite.
Result<NnlsResult> SolveNnls(const Matrix& a, const std::vector<double>& b);

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_FORMULAS_NNLS_H_
