// A store by the URI a user gives (`--store URI`): `postgresql://...` or `postgres://...` is the
// PostgreSQL engine (libpq's URI), anything else the path of the embedded engine's file.
#ifndef KWATT_STORE_OPEN_STORE_H_
#define KWATT_STORE_OPEN_STORE_H_

#include <memory>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/store/store.h"

namespace kwatt::store {

// True for a PostgreSQL URI.
bool IsPostgresUri(const std::string& uri);

// Opens the store at `uri`, creating it when `create` (an empty PostgreSQL database gets the
// tables; a missing file is made). The engines' errors; InvalidArgument for an empty URI.
Result<std::unique_ptr<Store>> OpenStore(const std::string& uri, bool create);

}  // namespace kwatt::store

#endif  // KWATT_STORE_OPEN_STORE_H_
