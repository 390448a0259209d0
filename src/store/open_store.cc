#include "kwatt/store/open_store.h"

#include "kwatt/store/postgres_store.h"
#include "kwatt/store/sqlite_store.h"

namespace kwatt::store {

bool IsPostgresUri(const std::string& uri) {
  return uri.rfind("postgresql://", 0) == 0 || uri.rfind("postgres://", 0) == 0;
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& uri, bool create) {
  if (uri.empty()) {
    return Status::InvalidArgument(
        "an empty store URI: give a file (the embedded store) or postgresql://HOST/DB");
  }
  if (IsPostgresUri(uri)) {
    PostgresStoreOptions options;
    options.create_if_missing = create;
    return OpenPostgresStore(uri, options);
  }
  SqliteStoreOptions options;
  options.create_if_missing = create;
  return OpenSqliteStore(uri, options);
}

}  // namespace kwatt::store
