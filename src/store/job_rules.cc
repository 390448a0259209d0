#include "src/store/job_rules.h"

#include <limits>

namespace kwatt::store::internal {

Result<int64_t> NextJobId(const std::string& site, std::optional<int64_t> highest) {
  if (!highest) return int64_t(1);
  if (*highest == std::numeric_limits<int64_t>::max()) {
    return Status::InvalidArgument("the highest job id of site " + site + " is " +
                                   std::to_string(*highest) +
                                   ", the largest there is: give the new job's id (--id)");
  }
  return std::max<int64_t>(*highest, 0) + 1;
}

Status JobExists(const std::string& site, int64_t id) {
  return Status::InvalidArgument("the store has a job " + std::to_string(id) + " on site " + site +
                                 " already: give another id, or replace it explicitly (--replace)");
}

}  // namespace kwatt::store::internal
