#include <uma/actors/metrics/detail/http_session.hpp>

#include <algorithm>
#include <string_view>
#include <utility>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

namespace uma::detail {

namespace http = boost::beast::http;

http_session::http_session(boost::asio::ip::tcp::socket socket,
                           const std::vector<http_route>& routes, http_limits limits,
                           std::shared_ptr<http_gate> gate,
                           std::function<void(http_session*)> on_close)
    : stream_(std::move(socket)),
      buffer_(limits.max_request_bytes),
      routes_(routes),
      limits_(limits),
      gate_(std::move(gate)),
      on_close_(std::move(on_close)) {}

void http_session::start() {
  boost::asio::dispatch(stream_.get_executor(),
                        [self = shared_from_this()] { self->read_request(); });
}

void http_session::refuse(unsigned status, std::string body) {
  boost::asio::dispatch(stream_.get_executor(),
                        [self = shared_from_this(), status, body = std::move(body)]() mutable {
                          self->write({.status = status, .body = std::move(body)}, false);
                        });
}

void http_session::read_request() {
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(limits_.max_request_bytes));
  parser_->body_limit(limits_.max_request_bytes);
  stream_.expires_after(limits_.read_timeout);
  http::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this()](boost::beast::error_code ec, std::size_t) { self->on_read(ec); });
}

void http_session::on_read(boost::beast::error_code ec) {
  if (ec == http::error::header_limit || ec == http::error::body_limit ||
      ec == http::error::buffer_overflow) {
    write({.status = 413,
           .body = "request too large: at most " + std::to_string(limits_.max_request_bytes) +
                   " bytes of request line, header and body\n"},
          false);
  } else if (ec == http::error::end_of_stream || ec == boost::beast::error::timeout ||
             ec == boost::asio::error::operation_aborted ||
             ec == boost::asio::error::connection_reset || ec == boost::asio::error::eof) {
    close();  // the client left, or sat idle past the read timeout
  } else if (ec) {
    write({.status = 400, .body = "malformed request: " + ec.message() + "\n"}, false);
  } else {
    dispatch_request();
  }
}

void http_session::dispatch_request() {
  const auto& request = parser_->get();
  version_ = request.version();
  keep_alive_ = request.keep_alive();
  if (!authorized()) {
    write({.status = 401, .body = "a bearer token is required (Authorization: Bearer ...)\n"},
          false, std::pair{http::field::www_authenticate, "Bearer realm=\"uma\""});
    return;
  }
  if (request.method() != http::verb::get) {
    write({.status = 405, .body = "only GET is served here\n"}, false,
          std::pair{http::field::allow, "GET"});
    return;
  }
  std::string_view path(request.target().data(), request.target().size());
  path = path.substr(0, path.find('?'));
  for (const auto& route : routes_) {
    if (route.path == path) {
      stream_.expires_never();  // the reply may take up to the source's own timeout
      route.handler(responder());
      return;
    }
  }
  std::string known;
  for (const auto& route : routes_)
    known += (known.empty() ? "" : ", ") + route.path;
  write(
      {.status = 404, .body = "no such path: " + std::string(path) + " (served: " + known + ")\n"},
      keep_alive_);
}

http_respond http_session::responder() {
  return [weak = weak_from_this(), gate = gate_](http_reply reply) {
    const std::lock_guard lock(gate->mutex);
    if (gate->io == nullptr)
      return;  // the server is shutting down
    boost::asio::post(*gate->io, [weak, reply = std::move(reply)]() mutable {
      if (auto self = weak.lock())
        boost::asio::dispatch(self->stream_.get_executor(),
                              [self, reply = std::move(reply)]() mutable {
                                self->write(std::move(reply), self->keep_alive_);
                              });
    });
  };
}

bool http_session::authorized() const {
  const auto& token = limits_.bearer_token;
  if (token.empty())
    return true;
  const auto& request = parser_->get();
  const auto it = request.find(http::field::authorization);
  const std::string expected = "Bearer " + token;
  if (it == request.end() || it->value().size() != expected.size())
    return false;
  unsigned char differ = 0;  // every byte compared: the time says nothing of the token
  for (std::size_t i = 0; i < expected.size(); ++i)
    differ |= static_cast<unsigned char>(it->value()[i] ^ expected[i]);
  return differ == 0;
}

void http_session::write(http_reply reply, bool keep_alive,
                         std::optional<std::pair<http::field, const char*>> header) {
  if (closed_)
    return;
  auto response = std::make_shared<http::response<http::string_body>>(
      static_cast<http::status>(reply.status), version_);
  response->set(http::field::server, "uma");
  response->set(http::field::content_type, reply.content_type);
  if (header)
    response->set(header->first, header->second);
  response->keep_alive(keep_alive);
  response->body() = std::move(reply.body);
  response->prepare_payload();
  stream_.expires_after(limits_.read_timeout);
  http::async_write(
      stream_, *response,
      [self = shared_from_this(), response, keep_alive](boost::beast::error_code ec, std::size_t) {
        if (ec)
          self->close();
        else if (!keep_alive)
          self->linger();
        else
          self->read_request();
      });
}

void http_session::linger() {
  // Closing with unread request bytes would reset the connection, and the client could lose
  // the reply: stop sending, read and drop what still comes until the client closes or a
  // second passes, then close.
  if (drain_.empty()) {  // the first round: one deadline for the whole drain
    boost::beast::error_code ignored;
    stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::min(limits_.read_timeout, std::chrono::milliseconds(1000)));
    drain_.resize(4096);
  }
  stream_.async_read_some(boost::asio::buffer(drain_),
                          [self = shared_from_this()](boost::beast::error_code ec, std::size_t) {
                            if (ec)
                              self->close();
                            else
                              self->linger();
                          });
}

void http_session::close() {
  if (closed_)
    return;
  closed_ = true;
  boost::beast::error_code ignored;
  stream_.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_send, ignored);
  stream_.close();
  if (on_close_)
    on_close_(this);
}

}  // namespace uma::detail
