#include "kwatt/http/transport.h"

#include <curl/curl.h>

#include <map>

#include "src/http/curl_easy.h"

namespace kwatt::http {
namespace {

using internal::ConfigureEasy;
using internal::EnsureCurlInitialised;
using internal::ReadResponseInfo;

constexpr size_t kErrorBodyLimit = 65536;

class CurlTransport : public Transport {
 public:
  explicit CurlTransport(const ClientSettings& settings) : settings_(settings) {
    EnsureCurlInitialised();
    multi_ = curl_multi_init();
    curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, long(settings_.max_connections));
  }

  ~CurlTransport() override {
    for (auto& [easy, handle] : handles_) {
      curl_multi_remove_handle(multi_, easy);
      curl_easy_cleanup(easy);
    }
    if (multi_) curl_multi_cleanup(multi_);
  }

  int64_t Start(const std::string& url, BodySink body) override {
    auto handle = std::make_unique<Handle>();
    handle->id = ++last_id_;
    handle->body = std::move(body);
    handle->url = url;
    handle->easy = curl_easy_init();
    CURL* easy = handle->easy;
    ConfigureEasy(easy, settings_);
    curl_easy_setopt(easy, CURLOPT_URL, handle->url.c_str());
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnData);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, handle.get());
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, handle->error);
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_multi_add_handle(multi_, easy);
    int64_t id = handle->id;
    handles_.emplace(easy, std::move(handle));
    return id;
  }

  void Poll(int timeout_ms, std::vector<TransferOutcome>* done) override {
    size_t before = done->size();
    Collect(done);
    if (done->size() == before) {
      curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
      Collect(done);
    }
  }

 private:
  struct Handle {
    CURL* easy = nullptr;
    int64_t id = 0;
    BodySink body;
    std::string url;
    long status = -1;
    std::string error_body;
    int64_t received = 0;
    Status aborted;  // the BodySink's error
    char error[CURL_ERROR_SIZE] = "";
  };

  static size_t OnData(char* data, size_t size, size_t count, void* user) {
    auto* h = static_cast<Handle*>(user);
    size_t length = size * count;
    if (h->status < 0) curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &h->status);
    h->received += int64_t(length);
    if (h->status == 200) {
      Status status = h->body(std::string_view(data, length));
      if (!status.ok()) {
        h->aborted = status;
        return 0;  // aborts the transfer
      }
    } else if (h->error_body.size() < kErrorBodyLimit) {
      h->error_body.append(data, length);
    }
    return length;
  }

  void Collect(std::vector<TransferOutcome>* done) {
    int still = 0;
    curl_multi_perform(multi_, &still);
    int queued = 0;
    while (CURLMsg* message = curl_multi_info_read(multi_, &queued)) {
      if (message->msg != CURLMSG_DONE) continue;
      CURL* easy = message->easy_handle;
      CURLcode code = message->data.result;
      auto node = handles_.extract(easy);
      curl_multi_remove_handle(multi_, easy);
      Handle& h = *node.mapped();
      TransferOutcome outcome;
      outcome.id = h.id;
      outcome.body_bytes = h.received;
      if (!h.aborted.ok()) {
        outcome.transport = h.aborted;
      } else if (code != CURLE_OK) {
        outcome.transport =
            Status::Unavailable("transfer from " + Redact(h.url.substr(0, h.url.find('?'))) +
                                " failed: " + (h.error[0] ? h.error : curl_easy_strerror(code)));
      } else {
        ReadResponseInfo(easy, &outcome.response);
        outcome.response.body = std::move(h.error_body);
      }
      curl_easy_cleanup(easy);
      done->push_back(std::move(outcome));
    }
  }

  const ClientSettings settings_;
  CURLM* multi_ = nullptr;
  std::map<CURL*, std::unique_ptr<Handle>> handles_;
  int64_t last_id_ = 0;
};

}  // namespace

std::unique_ptr<Transport> NewCurlTransport(const ClientSettings& settings) {
  return std::make_unique<CurlTransport>(settings);
}

}  // namespace kwatt::http
