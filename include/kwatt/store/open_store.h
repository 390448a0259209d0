// A store by the URI a user gives (`--store URI`): a PostgreSQL connection string is the
// PostgreSQL engine, anything else the path of the embedded engine's file.
#ifndef KWATT_STORE_OPEN_STORE_H_
#define KWATT_STORE_OPEN_STORE_H_

#include <memory>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/store/store.h"

namespace kwatt::store {

// True for a PostgreSQL connection string, in either of libpq's forms: a URI
// (`postgresql://...` or `postgres://...`), or key=value pairs whose first keyword is one of
// libpq's (`host=db dbname=lab`, `dbname = lab`), as psql takes them. A file whose name reads so
// is given with a directory (`./host=x`).
bool IsPostgresUri(const std::string& uri);

// `uri` as every message shows it: a PostgreSQL URI without its userinfo and with the value of a
// `password` or `sslpassword` parameter (its name percent-encoded or not) replaced by `***`; the
// key=value form with those values replaced by `***` (and what does not read as key=value pairs
// left out, as `...`); a file's path as it is.
std::string ShownStoreUri(const std::string& uri);

// Opens the store at `uri`, creating it when `create` (an empty PostgreSQL database gets the
// tables; a missing file is made). The engines' errors; InvalidArgument for an empty URI.
Result<std::unique_ptr<Store>> OpenStore(const std::string& uri, bool create);

}  // namespace kwatt::store

#endif  // KWATT_STORE_OPEN_STORE_H_
