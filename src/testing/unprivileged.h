// For tests of what a user who is not root meets (a root-only file, a directory that cannot be
// written): the tests run as root, which reads and writes anything, so the check runs in a forked
// child that drops to `nobody`. Internal to the tests.
#ifndef KWATT_SRC_TESTING_UNPRIVILEGED_H_
#define KWATT_SRC_TESTING_UNPRIVILEGED_H_

#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <string>

namespace kwatt::testing {

// Runs `check` in a child process as the user nobody and returns the text it returned; nullopt
// when this process is not root or has no user nobody (nothing to drop from, or to), and
// "setresuid failed" when dropping failed. The child only writes its text and exits: `check` may
// use anything the parent set up before the call.
inline std::optional<std::string> RunAsNobody(const std::function<std::string()>& check) {
  if (::geteuid() != 0) return std::nullopt;
  const passwd* nobody = ::getpwnam("nobody");
  if (!nobody) return std::nullopt;
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  pid_t child = ::fork();
  if (child < 0) return "fork failed";
  if (child == 0) {
    ::close(fds[0]);
    std::string text;
    if (::setresgid(nobody->pw_gid, nobody->pw_gid, nobody->pw_gid) != 0 ||
        ::setresuid(nobody->pw_uid, nobody->pw_uid, nobody->pw_uid) != 0) {
      text = "setresuid failed";
    } else {
      text = check();
    }
    (void)!::write(fds[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string text;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) text.append(buffer, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return text;
}

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_UNPRIVILEGED_H_
