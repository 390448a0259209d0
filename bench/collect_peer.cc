// The devices of bench/collect_bench.py: N simulated Prometheus exporters, each on its own
// 127.0.0.1 port, served by one thread with epoll so that the peer is not what a collector waits
// for.
//
// Usage: kwatt_collect_peer [--ports N]   (default 1000)
//
// Binds N listening sockets to 127.0.0.1 port 0 and prints their ports on one line of standard
// output (space-separated), then serves every GET (HTTP/1.1 keep-alive, or one request a
// connection when the client asks for it) with a small exposition: 20 samples of node-exporter
// names (node_load1, node_load5, node_load15, power_watt{psu="1"}, power_watt{psu="2"}, memory,
// CPU, network, time...), their values changing with each request. SIGTERM or SIGINT stops it;
// it then prints on standard error the requests served, the connections accepted and the most
// connections open at once.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

volatile std::sig_atomic_t stop_requested = 0;

void OnSignal(int) { stop_requested = 1; }

struct Connection {
  int port_index = 0;
  std::string in;
  std::string out;
  size_t out_sent = 0;
  bool close_after = false;
};

// The exposition of device `port_index` at its `count`-th request.
std::string Exposition(int port_index, uint64_t count) {
  double t = double(count);
  double load = 0.5 + 0.01 * double(port_index % 50) + 0.001 * double(count % 100);
  char buffer[2048];
  int n = std::snprintf(
      buffer, sizeof buffer,
      "# HELP node_load1 1m load average.\n# TYPE node_load1 gauge\nnode_load1 %.3f\n"
      "# HELP node_load5 5m load average.\n# TYPE node_load5 gauge\nnode_load5 %.3f\n"
      "# HELP node_load15 15m load average.\n# TYPE node_load15 gauge\nnode_load15 %.3f\n"
      "# HELP power_watt Power drawn by each power supply.\n# TYPE power_watt gauge\n"
      "power_watt{psu=\"1\"} %.1f\npower_watt{psu=\"2\"} %.1f\n"
      "# TYPE node_memory_MemFree_bytes gauge\nnode_memory_MemFree_bytes %.0f\n"
      "# TYPE node_memory_MemTotal_bytes gauge\nnode_memory_MemTotal_bytes 6.7108864e+10\n"
      "# TYPE node_cpu_seconds_total counter\n"
      "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} %.2f\n"
      "node_cpu_seconds_total{cpu=\"0\",mode=\"system\"} %.2f\n"
      "node_cpu_seconds_total{cpu=\"0\",mode=\"user\"} %.2f\n"
      "node_cpu_seconds_total{cpu=\"0\",mode=\"iowait\"} %.2f\n"
      "node_cpu_seconds_total{cpu=\"1\",mode=\"idle\"} %.2f\n"
      "node_cpu_seconds_total{cpu=\"1\",mode=\"system\"} %.2f\n"
      "node_cpu_seconds_total{cpu=\"1\",mode=\"user\"} %.2f\n"
      "node_cpu_seconds_total{cpu=\"1\",mode=\"iowait\"} %.2f\n"
      "# TYPE node_network_receive_bytes_total counter\n"
      "node_network_receive_bytes_total{device=\"eth0\"} %.0f\n"
      "# TYPE node_network_transmit_bytes_total counter\n"
      "node_network_transmit_bytes_total{device=\"eth0\"} %.0f\n"
      "# TYPE node_procs_running gauge\nnode_procs_running %d\n"
      "# TYPE node_boot_time_seconds gauge\nnode_boot_time_seconds 1.7e+09\n"
      "# TYPE node_time_seconds gauge\nnode_time_seconds %.3f\n",
      load, load * 0.9, load * 0.8, 180.0 + double(count % 40), 175.0 + double(count % 30),
      3.2e10 - 1e3 * t, 1000 + t, 10 + 0.1 * t, 20 + 0.2 * t, 0.5 + 0.01 * t, 1001 + t,
      11 + 0.1 * t, 21 + 0.2 * t, 0.6 + 0.01 * t, 1e6 + 1500 * t, 5e5 + 900 * t, 1 + int(count % 7),
      1.7e9 + t);
  return std::string(buffer, size_t(n));
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

bool HeaderSays(const std::string& head, const char* name, const char* value) {
  // Case-insensitive search of "name: value" in the request's head (enough for this peer).
  std::string lower(head.size(), ' ');
  for (size_t i = 0; i < head.size(); ++i) lower[i] = char(std::tolower((unsigned char)head[i]));
  std::string needle = std::string(name) + ":";
  size_t at = lower.find(needle);
  return at != std::string::npos && lower.find(value, at) < lower.find('\n', at);
}

}  // namespace

int main(int argc, char** argv) {
  int ports = 1000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--ports") == 0 && i + 1 < argc) {
      ports = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: kwatt_collect_peer [--ports N]\n");
      return 2;
    }
  }
  if (ports <= 0) {
    std::fprintf(stderr, "kwatt_collect_peer: --ports must be positive\n");
    return 2;
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  int epoll = epoll_create1(0);
  if (epoll < 0) {
    std::perror("kwatt_collect_peer: epoll_create1");
    return 1;
  }
  // Listening sockets are told apart from connections by this map: fd -> port index.
  std::unordered_map<int, int> listeners;
  std::string line;
  for (int i = 0; i < ports; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
      std::fprintf(stderr, "kwatt_collect_peer: socket %d of %d: %s\n", i + 1, ports,
                   std::strerror(errno));
      return 1;
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        listen(fd, 128) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      std::fprintf(stderr, "kwatt_collect_peer: bind/listen: %s\n", std::strerror(errno));
      return 1;
    }
    SetNonBlocking(fd);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
    listeners[fd] = i;
    line += (i ? " " : "") + std::to_string(ntohs(address.sin_port));
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);

  std::unordered_map<int, Connection> connections;
  std::vector<uint64_t> requests_of(size_t(ports), 0);
  uint64_t requests = 0, accepted = 0;
  size_t most_open = 0;
  std::vector<epoll_event> events(1024);
  char buffer[16384];

  auto close_connection = [&](int fd) {
    epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    connections.erase(fd);
  };
  // Writes what is pending; false when the connection is gone.
  auto flush = [&](int fd, Connection& c) {
    while (c.out_sent < c.out.size()) {
      ssize_t n = send(fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        epoll_event event{};
        event.events = EPOLLIN | EPOLLOUT;
        event.data.fd = fd;
        epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event);
        return true;
      }
      if (n <= 0) return false;
      c.out_sent += size_t(n);
    }
    c.out.clear();
    c.out_sent = 0;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &event);
    return !c.close_after;
  };

  while (!stop_requested) {
    int ready = epoll_wait(epoll, events.data(), int(events.size()), 200);
    if (ready < 0) {
      if (errno == EINTR) continue;
      std::perror("kwatt_collect_peer: epoll_wait");
      return 1;
    }
    for (int e = 0; e < ready; ++e) {
      int fd = events[size_t(e)].data.fd;
      auto listener = listeners.find(fd);
      if (listener != listeners.end()) {
        while (true) {
          int client = accept4(fd, nullptr, nullptr, SOCK_NONBLOCK);
          if (client < 0) break;
          int one = 1;
          setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event event{};
          event.events = EPOLLIN;
          event.data.fd = client;
          epoll_ctl(epoll, EPOLL_CTL_ADD, client, &event);
          connections[client].port_index = listener->second;
          ++accepted;
          most_open = std::max(most_open, connections.size());
        }
        continue;
      }
      auto found = connections.find(fd);
      if (found == connections.end()) continue;
      Connection& c = found->second;
      if (events[size_t(e)].events & EPOLLOUT) {
        if (!flush(fd, c)) {
          close_connection(fd);
          continue;
        }
      }
      if (!(events[size_t(e)].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      bool gone = false;
      while (true) {
        ssize_t n = recv(fd, buffer, sizeof buffer, 0);
        if (n > 0) {
          c.in.append(buffer, size_t(n));
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        gone = true;  // closed by the client, or an error
        break;
      }
      // Every complete request head gets its answer (pipelined ones too).
      size_t end;
      while (!c.close_after && (end = c.in.find("\r\n\r\n")) != std::string::npos) {
        std::string head = c.in.substr(0, end + 2);
        c.in.erase(0, end + 4);
        bool http10 = head.find(" HTTP/1.0\r\n") != std::string::npos;
        c.close_after = http10 ? !HeaderSays(head, "connection", "keep-alive")
                               : HeaderSays(head, "connection", "close");
        std::string body;
        const char* status = "200 OK";
        if (head.compare(0, 4, "GET ") == 0) {
          body = Exposition(c.port_index, requests_of[size_t(c.port_index)]++);
        } else {
          status = "405 Method Not Allowed";
        }
        ++requests;
        c.out += "HTTP/1.1 " + std::string(status) +
                 "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
                 std::to_string(body.size()) + (c.close_after ? "\r\nConnection: close" : "") +
                 "\r\n\r\n" + body;
      }
      if (!c.out.empty() && !flush(fd, c)) gone = true;
      if (gone) close_connection(fd);
    }
  }
  std::fprintf(stderr, "requests %llu connections %llu most_open %zu\n",
               (unsigned long long)requests, (unsigned long long)accepted, most_open);
  return 0;
}
