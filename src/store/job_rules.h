// What every engine of the store answers when a job is added (kwatt/store/store.h, AddJob), in
// one place. Internal to the store.
#ifndef KWATT_SRC_STORE_JOB_RULES_H_
#define KWATT_SRC_STORE_JOB_RULES_H_

#include <cstdint>
#include <optional>
#include <string>

#include "kwatt/core/status.h"

namespace kwatt::store::internal {

// The id of a site's next job: one more than `highest` (1 when the site has none);
// InvalidArgument when `highest` is INT64_MAX (an id never wraps to a negative one), saying to
// give an id.
Result<int64_t> NextJobId(const std::string& site, std::optional<int64_t> highest);

// InvalidArgument: the site has a job of that id already (AddJob does not replace one).
Status JobExists(const std::string& site, int64_t id);

}  // namespace kwatt::store::internal

#endif  // KWATT_SRC_STORE_JOB_RULES_H_
