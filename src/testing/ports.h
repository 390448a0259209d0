// A TCP port for tests whose peer cannot be told to bind port 0 and say which it got (Debian's
// prometheus-node-exporter, a server started again on the port it had).
#ifndef KWATT_SRC_TESTING_PORTS_H_
#define KWATT_SRC_TESTING_PORTS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace kwatt::testing {

// A port of 127.0.0.1 nothing listens on now: bound to port 0, read back, closed. 0 when no
// socket can be bound.
inline int FreeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_PORTS_H_
