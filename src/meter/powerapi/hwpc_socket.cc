// HwpcSocketReader: PowerAPI's socket input, for hwpc-sensor's `-o socket` output. One thread:
// poll(2) over the listening socket, the connections and a pipe that RequestStop writes to.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kwatt/meter/powerapi/hwpc.h"

namespace kwatt::meter {

struct HwpcSocketReader::Connection {
  int fd = -1;
  std::string name;  // "127.0.0.1:53122"
  JsonDocumentSplitter splitter;
  int64_t oversized_counted = 0;  // splitter.oversized() already added to malformed_
  int64_t stray_counted = 0;      // splitter.stray_runs() already added
  ~Connection() {
    if (fd >= 0) ::close(fd);
  }
};

Result<std::unique_ptr<HwpcSocketReader>> HwpcSocketReader::Listen(const std::string& host,
                                                                   int port) {
  if (port < 0 || port > 65535) {
    return Status::InvalidArgument("port " + std::to_string(port) + " is not in 0..65535");
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(port));
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found) {
      return Status::InvalidArgument("\"" + host + "\" is neither an IPv4 address nor a name " +
                                     "that resolves to one");
    }
    address.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
    ::freeaddrinfo(found);
  }
  auto reader = std::unique_ptr<HwpcSocketReader>(new HwpcSocketReader());
  const std::string where = host + ":" + std::to_string(port);
  reader->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (reader->listen_fd_ < 0)
    return Status::IOError(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(reader->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(reader->listen_fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(reader->listen_fd_, 16) != 0) {
    return Status::IOError("cannot listen on " + where + ": " + std::strerror(errno));
  }
  socklen_t length = sizeof address;
  ::getsockname(reader->listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  reader->port_ = ntohs(address.sin_port);
  if (::pipe2(reader->stop_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::IOError(std::string("pipe: ") + std::strerror(errno));
  }
  return reader;
}

HwpcSocketReader::~HwpcSocketReader() {
  open_.clear();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int fd : stop_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void HwpcSocketReader::RequestStop() {
  char byte = 1;
  ssize_t ignored = ::write(stop_pipe_[1], &byte, 1);
  (void)ignored;
}

Result<bool> HwpcSocketReader::Next(HwpcReport* report) {
  while (ready_next_ >= ready_.size()) {
    ready_.clear();
    ready_next_ = 0;
    if (stopping_) return false;
    KWATT_RETURN_IF_ERROR(Poll());
  }
  *report = std::move(ready_[ready_next_++]);
  return true;
}

Status HwpcSocketReader::Poll() {
  std::vector<pollfd> fds;
  fds.push_back({stop_pipe_[0], POLLIN, 0});
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& c : open_) fds.push_back({c->fd, POLLIN, 0});
  int n = ::poll(fds.data(), fds.size(), -1);
  if (n < 0) {
    if (errno == EINTR) return Status::OK();
    return Status::IOError(std::string("poll: ") + std::strerror(errno));
  }
  if (fds[0].revents) stopping_ = true;  // what is readable now is still read below
  if (fds[1].revents & POLLIN) {
    while (true) {
      sockaddr_in peer{};
      socklen_t length = sizeof peer;
      int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &length,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      char text[INET_ADDRSTRLEN] = "?";
      ::inet_ntop(AF_INET, &peer.sin_addr, text, sizeof text);
      c->name = std::string(text) + ":" + std::to_string(ntohs(peer.sin_port));
      open_.push_back(std::move(c));
      ++connections_;
    }
  }
  std::vector<std::pair<std::string, int64_t>> documents;
  char buffer[1 << 16];
  for (size_t i = 2; i < fds.size(); ++i) {
    if (!fds[i].revents) continue;
    Connection& c = *open_[i - 2];
    bool closed = false;
    while (true) {
      ssize_t got = ::read(c.fd, buffer, sizeof buffer);
      if (got > 0) {
        documents.clear();
        c.splitter.Feed(std::string_view(buffer, size_t(got)), &documents);
        for (const auto& [text, line] : documents) {
          HwpcReport r;
          Status parsed = ParseHwpcJson(text, c.name + " line " + std::to_string(line), &r);
          if (parsed.ok()) {
            ready_.push_back(std::move(r));
          } else {
            ++malformed_;
            last_error_ = parsed.message();
          }
        }
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      closed = true;  // end of stream or a reset
      break;
    }
    if (closed) {
      if (!c.splitter.Pending().empty()) {
        ++malformed_;
        last_error_ = c.name + " line " + std::to_string(c.splitter.pending_line()) +
                      ": the connection closed inside a document";
      }
      ::close(c.fd);
      c.fd = -1;
    }
    malformed_ += c.splitter.oversized() - c.oversized_counted;
    c.oversized_counted = c.splitter.oversized();
    if (c.splitter.stray_runs() > c.stray_counted) {
      malformed_ += c.splitter.stray_runs() - c.stray_counted;
      c.stray_counted = c.splitter.stray_runs();
      last_error_ = c.name + " line " + std::to_string(c.splitter.stray_line()) +
                    ": text outside a JSON object";
    }
  }
  std::erase_if(open_, [](const std::unique_ptr<Connection>& c) { return c->fd < 0; });
  return Status::OK();
}

}  // namespace kwatt::meter
