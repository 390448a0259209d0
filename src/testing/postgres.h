// A throwaway PostgreSQL cluster for tests and benchmarks: Debian's PostgreSQL (`make deps`
// installs it), initialised in a temporary directory and started in the foreground of nothing
// (pg_ctl), listening on a Unix socket in that directory only (no TCP port), stopped and removed
// with the object. initdb refuses root: as root, the programs run as `nobody`.
//
// A machine where `make deps` ran has PostgreSQL: a test that needs it fails there, never skips.
#ifndef KWATT_SRC_TESTING_POSTGRES_H_
#define KWATT_SRC_TESTING_POSTGRES_H_

#include <libpq-fe.h>
#include <pwd.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "kwatt/core/status.h"

namespace kwatt::testing {

class TestPostgres {
 public:
  // Starts a cluster; InvalidArgument naming what is missing when PostgreSQL is not installed.
  // `durable`: fsync on, as in production (benchmarks); tests run without it.
  static Result<std::unique_ptr<TestPostgres>> Start(bool durable = false) {
    std::string bin = FindBin();
    if (bin.empty()) {
      return Status::InvalidArgument(
          "PostgreSQL's initdb is not in /usr/lib/postgresql/*/bin: run make deps");
    }
    std::unique_ptr<TestPostgres> pg(new TestPostgres());
    pg->bin_ = bin;
    pg->dir_ = std::filesystem::temp_directory_path() /
               ("kwatt_pg_" + std::to_string(::getpid()) + "_" + std::to_string(Counter()++));
    std::filesystem::remove_all(pg->dir_);
    std::filesystem::create_directories(pg->dir_);
    if (::geteuid() == 0) {
      struct passwd* nobody = ::getpwnam("nobody");
      if (!nobody || ::chown(pg->dir_.c_str(), nobody->pw_uid, nobody->pw_gid) != 0) {
        return Status::IOError("cannot give " + pg->dir_.string() + " to nobody");
      }
      pg->as_user_ = "setpriv --reuid=nobody --regid=nogroup --clear-groups ";
    }
    std::string data = (pg->dir_ / "data").string();
    if (pg->Run("initdb -D " + data + " -A trust -U postgres --no-sync -E UTF8 --locale=C") != 0) {
      return Status::IOError("initdb failed: see " + (pg->dir_ / "log").string());
    }
    pg->durable_ = durable;
    KWATT_RETURN_IF_ERROR(pg->StartServer());
    return pg;
  }

  // Stops the server (`mode`: pg_ctl's fast, immediate...) and starts it again on the same data
  // directory and socket: what a restart does to the clients' connections.
  Status Restart(const std::string& mode = "fast") {
    KWATT_RETURN_IF_ERROR(StopServer(mode));
    return StartServer();
  }

  // Stops the server (a peer down); its data and socket directory stay.
  Status StopServer(const std::string& mode = "fast") {
    if (Run("pg_ctl -D " + (dir_ / "data").string() + " -w -m " + mode + " stop") != 0) {
      return Status::IOError("pg_ctl stop failed: see " + (dir_ / "log").string());
    }
    started_ = false;
    return Status::OK();
  }

  // Starts the server (again, after StopServer) on the same data directory and socket.
  Status StartServer() {
    // fsync off for tests: a test cluster does not outlive the test (the store's guarantees are
    // PostgreSQL's, with fsync on).
    if (Run("pg_ctl -D " + (dir_ / "data").string() + " -w -l " + (dir_ / "server.log").string() +
            " -o \"-k " + dir_.string() + " -c listen_addresses=''" + (durable_ ? "" : " -F") +
            "\" start") != 0) {
      return Status::IOError("pg_ctl start failed: see " + (dir_ / "server.log").string());
    }
    started_ = true;
    return Status::OK();
  }

  ~TestPostgres() {
    if (started_) Run("pg_ctl -D " + (dir_ / "data").string() + " -m immediate stop");
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // libpq's URI of database `db` of the cluster.
  std::string Uri(const std::string& db = "postgres") const {
    return "postgresql:///" + db + "?host=" + dir_.string() + "&user=postgres";
  }

  // Creates a new empty database and returns its URI.
  Result<std::string> NewDatabase() {
    std::string name = "kwatt_" + std::to_string(databases_++);
    PGconn* conn = PQconnectdb(Uri().c_str());
    Status status = Status::OK();
    if (PQstatus(conn) != CONNECTION_OK) {
      status = Status::Unavailable(PQerrorMessage(conn));
    } else {
      PGresult* r = PQexec(conn, ("CREATE DATABASE " + name).c_str());
      if (PQresultStatus(r) != PGRES_COMMAND_OK) status = Status::IOError(PQerrorMessage(conn));
      PQclear(r);
    }
    PQfinish(conn);
    KWATT_RETURN_IF_ERROR(status);
    return Uri(name);
  }

  const std::filesystem::path& dir() const { return dir_; }
  // PostgreSQL's programs' directory (/usr/lib/postgresql/VERSION/bin).
  const std::string& bin() const { return bin_; }
  // The postmaster's process id (0 when it is not running).
  long Pid() const {
    std::ifstream pid_file(dir_ / "data" / "postmaster.pid");
    long pid = 0;
    pid_file >> pid;
    return started_ ? pid : 0;
  }

 private:
  TestPostgres() = default;

  static std::atomic<int>& Counter() {
    static std::atomic<int> counter{0};
    return counter;
  }

  static std::string FindBin() {
    std::error_code error;
    for (int version = 20; version >= 12; --version) {
      std::string bin = "/usr/lib/postgresql/" + std::to_string(version) + "/bin";
      if (std::filesystem::exists(bin + "/initdb", error)) return bin;
    }
    return "";
  }

  int Run(const std::string& command) const {
    std::string line = "cd " + dir_.string() + " && " + as_user_ + bin_ + "/" + command + " >> " +
                       (dir_ / "log").string() + " 2>&1";
    return std::system(line.c_str());
  }

  std::string bin_;
  std::filesystem::path dir_;
  std::string as_user_;
  bool started_ = false;
  bool durable_ = false;
  int databases_ = 0;
};

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_POSTGRES_H_
