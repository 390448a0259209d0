#include "kwatt/jobs/job.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>

namespace kwatt::jobs::job_test {
namespace {

TEST(SplitJobNodeName, GivesTheUidAndTheSiteNamedWithIt) {
  for (const char* text :
       {"nova-1", "nova-1.lyon", "nova-1.lyon.grid5000.fr", "nova-1.lyon.grid5000.fr."}) {
    std::optional<JobNodeName> name = SplitJobNodeName(text);
    ASSERT_TRUE(name) << text;
    EXPECT_EQ(name->uid, "nova-1") << text;
    EXPECT_EQ(name->site, std::string_view(text) == "nova-1" ? "" : "lyon") << text;
  }
  for (const char* text : {"", ".lyon", "nova-1.", "a.b.c", "nova-1.grid5000.fr"}) {
    EXPECT_FALSE(SplitJobNodeName(text)) << text;
  }
}

}  // namespace
}  // namespace kwatt::jobs::job_test
