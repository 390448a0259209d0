#include "kwatt/store/writer_lock.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "kwatt/store/open_store.h"

namespace kwatt::store {
namespace {

// "PID 4242 on host-1": who holds a lock, as it says itself.
std::string Holder() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return "PID " + std::to_string(::getpid()) + (host[0] ? std::string(" on ") + host : "");
}

Status Held(const std::string& name, const std::string& holder, const std::string& shown,
            const std::string& where) {
  return Status::InvalidArgument("another " + name + (holder.empty() ? "" : " (" + holder + ")") +
                                 " writes into " + shown + " (it holds " + where + "): one " +
                                 name + " per store; stop it first, or give another store");
}

class FileLock : public WriterLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {}
  ~FileLock() override { ::close(fd_); }

 private:
  int fd_;
};

Result<std::unique_ptr<WriterLock>> TakeFileLock(const std::string& path, const std::string& shown,
                                                 const std::string& name) {
  std::string lock_path = path + "." + name;
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IOError("cannot open " + lock_path + " (the " + name +
                           "'s lock of the store): " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char text[300] = {};
    ssize_t got = ::pread(fd, text, sizeof(text) - 1, 0);
    ::close(fd);
    std::string holder = got > 0 ? std::string(text, size_t(got)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return Held(name, holder, shown, lock_path);
  }
  std::string holder = Holder() + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, holder.data(), holder.size(), 0) != ssize_t(holder.size())) {
    Status error = Status::IOError("cannot write " + lock_path + ": " + std::strerror(errno));
    ::close(fd);
    return error;
  }
  return std::unique_ptr<WriterLock>(std::make_unique<FileLock>(fd));
}

class PostgresLock : public WriterLock {
 public:
  PostgresLock(PGconn* conn, std::string key) : conn_(conn), key_(std::move(key)) {}
  // Unlocked before the session ends: the server ends a closed session's backend (and frees its
  // locks) only some time after the connection closes, and whoever takes the lock next must not
  // find it still held. Should the unlock fail, the session's end frees it.
  ~PostgresLock() override {
    const char* values[] = {key_.c_str()};
    PQclear(PQexecParams(conn_, "SELECT pg_advisory_unlock(27511, hashtext($1))", 1, nullptr,
                         values, nullptr, nullptr, 0));
    PQfinish(conn_);
  }

 private:
  PGconn* conn_;
  std::string key_;
};

// The first column of the first row of `sql` ($1 = `key`), or an error status.
Result<std::string> Scalar(PGconn* conn, const char* sql, const std::string& key,
                           const std::string& shown) {
  const char* values[] = {key.c_str()};
  PGresult* r = PQexecParams(conn, sql, 1, nullptr, values, nullptr, nullptr, 0);
  Result<std::string> out = std::string();
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    std::string message = PQresultErrorMessage(r);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    out = Status::Unavailable(shown + ": " + message);
  } else if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) {
    out = std::string(PQgetvalue(r, 0, 0));
  }
  PQclear(r);
  return out;
}

Result<std::unique_ptr<WriterLock>> TakePostgresLock(const std::string& uri,
                                                     const std::string& shown,
                                                     const std::string& name) {
  std::string application = "kwatt " + name + " (" + Holder() + ")";
  const char* keywords[] = {"dbname", "application_name", nullptr};
  const char* values[] = {uri.c_str(), application.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return Status::Unavailable("cannot connect to the PostgreSQL store " + shown + ": " + message);
  }
  // The server's notices on this connection (a shutdown's "terminating connection", read when the
  // lock is given back) are not the user's business: the store's own connection reports outages.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  // The two-key form: (a constant for kwatt, the name's hash), seen in pg_locks as classid and
  // objid.
  std::string key = "kwatt " + name;
  Result<std::string> taken =
      Scalar(conn, "SELECT pg_try_advisory_lock(27511, hashtext($1))", key, shown);
  if (taken.ok() && *taken == "t") {
    return std::unique_ptr<WriterLock>(std::make_unique<PostgresLock>(conn, key));
  }
  Result<std::string> holder =
      taken.ok() ? Scalar(conn,
                          "SELECT coalesce(nullif(a.application_name, ''), 'PostgreSQL backend ' "
                          "|| l.pid) FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = "
                          "l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.classid = "
                          "27511 AND l.objid::bigint = (hashtext($1)::bigint & 4294967295) AND "
                          "l.database = (SELECT oid FROM pg_database WHERE datname = "
                          "current_database()) LIMIT 1",
                          key, shown)
                 : Result<std::string>(taken.status());
  PQfinish(conn);
  KWATT_RETURN_IF_ERROR(holder.status());
  // "kwatt collector (PID 4242 on host-1)": what is in the parentheses.
  std::string who = *holder;
  std::string prefix = "kwatt " + name + " (";
  if (who.starts_with(prefix) && who.ends_with(")")) {
    who = who.substr(prefix.size(), who.size() - prefix.size() - 1);
  }
  return Held(name, who, shown, "its advisory lock \"" + key + "\"");
}

}  // namespace

Result<std::unique_ptr<WriterLock>> TakeWriterLock(const std::string& uri, const std::string& shown,
                                                   const std::string& name) {
  if (IsPostgresUri(uri)) return TakePostgresLock(uri, shown, name);
  return TakeFileLock(uri, shown, name);
}

}  // namespace kwatt::store
