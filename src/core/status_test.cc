#include "kwatt/core/status.h"

#include <gtest/gtest.h>

namespace kwatt::status_test {
namespace {

Result<int> Half(int n) {
  if (n % 2) return Status::InvalidArgument(std::to_string(n) + " is odd");
  return n / 2;
}

// Halves twice, through the macro: the first failure is returned as it is.
Result<int> Quarter(int n) {
  KWATT_ASSIGN_OR_RETURN(int half, Half(n));
  int quarter = 0;
  KWATT_ASSIGN_OR_RETURN(quarter, Half(half));
  return quarter;
}

TEST(Status, OkCarriesNothingAndErrorsTheirCodeAndMessage) {
  EXPECT_TRUE(Status::OK().ok());
  EXPECT_EQ(Status::OK().ToString(), "OK");
  Status error = Status::NotFound("no such node");
  EXPECT_EQ(error.code(), Status::Code::kNotFound);
  EXPECT_EQ(error.ToString(), "NotFound: no such node");
  EXPECT_EQ(error.WithContext("--nodes").message(), "--nodes: no such node");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

TEST(Status, AssignOrReturn) {
  Result<int> quarter = Quarter(12);
  ASSERT_TRUE(quarter.ok());
  EXPECT_EQ(*quarter, 3);
  EXPECT_EQ(Quarter(6).status().message(), "3 is odd");
  EXPECT_EQ(Quarter(5).status().code(), Status::Code::kInvalidArgument);
}

TEST(Result, FromAnOkStatusIsAnInternalError) {
  Result<int> wrong = Status::OK();
  EXPECT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Status::Code::kInternal);
}

}  // namespace
}  // namespace kwatt::status_test
