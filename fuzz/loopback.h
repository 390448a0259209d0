// Loopback connections for the harnesses that fuzz kwatt's servers over real sockets.
#ifndef KWATT_FUZZ_LOOPBACK_H_
#define KWATT_FUZZ_LOOPBACK_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace kwatt::fuzz {

// A connected socket to 127.0.0.1:`port`. Tens of thousands of inputs each open a connection:
// a connect interrupted by libFuzzer's timer signal is waited for, and one refused for want of a
// local port (EADDRNOTAVAIL, while earlier connections leave TIME_WAIT) or a full backlog is
// tried again for up to 10 s. Aborts, naming the error, when none can be had: that is the
// machine's, not a finding in the server, and says so.
inline int ConnectLoopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int error = 0;
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = errno;
    } else if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
      return fd;
    } else {
      error = errno;
      if (error == EINTR || error == EINPROGRESS) {
        // The connection goes on in the background: wait for it and read its outcome.
        pollfd p{fd, POLLOUT, 0};
        int ready;
        do {
          ready = ::poll(&p, 1, 10'000);
        } while (ready < 0 && errno == EINTR);
        socklen_t length = sizeof(error);
        if (ready == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 &&
            error == 0) {
          return fd;
        }
      }
      ::close(fd);
    }
    bool again = error == EADDRNOTAVAIL || error == EAGAIN || error == ECONNREFUSED ||
                 error == ETIMEDOUT || error == EINTR || error == EMFILE || error == ENFILE;
    if (!again || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "cannot connect to the harness's own server on 127.0.0.1:%d: %s\n", port,
               std::strerror(error));
  std::abort();
}

// Closes a connection whose exchange is over with a reset rather than a FIN, so that the harness
// leaves no TIME_WAIT behind it (each holds a local port for a minute).
inline void CloseAborting(int fd) {
  linger abort_on_close{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
  ::close(fd);
}

}  // namespace kwatt::fuzz

#endif  // KWATT_FUZZ_LOOPBACK_H_
