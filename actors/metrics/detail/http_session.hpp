#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

namespace uma::detail {

/// What a route answers.
struct http_reply {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body{};
};

/// Delivers a route's reply to its connection. Callable from any thread, once; a reply that
/// arrives after the connection or the server is gone is dropped.
using http_respond = std::function<void(http_reply)>;

/// A GET route: the path it answers and what answers it (on the server's thread; it may reply
/// later, from any thread, through the `http_respond` it gets).
struct http_route {
  std::string path;
  std::function<void(http_respond)> handler;
};

/// Where replies may still be posted: the server's io_context until the server closes the
/// gate (under its mutex), nothing after. Replies from other threads go through it, so none
/// touches an io_context that is gone.
struct http_gate {
  std::mutex mutex;
  boost::asio::io_context* io = nullptr;
};

/// The bounds one connection lives within, and who may ask.
struct http_limits {
  std::size_t max_request_bytes = 8192;  ///< request line, header and body together
  std::chrono::milliseconds read_timeout{10'000};
  /// Non-empty: every request must carry `Authorization: Bearer <token>`; any other is
  /// answered 401 with `WWW-Authenticate: Bearer`, before its route runs.
  std::string bearer_token{};
};

/// One HTTP/1.1 connection of a read-only server (Boost.Beast): reads a request within the
/// limits, routes a GET by path, writes the reply, and reads the next one while the client
/// keeps the connection alive. Refuses a request too large (413), malformed (400), without the
/// bearer token when one is set (401), or not a GET (405, with `Allow: GET`); closes a
/// connection idle past the read timeout.
class http_session : public std::enable_shared_from_this<http_session> {
 public:
  /// `routes` and the gate outlive the session; `on_close` runs once, on the server's thread,
  /// when the connection ends.
  http_session(boost::asio::ip::tcp::socket socket, const std::vector<http_route>& routes,
               http_limits limits, std::shared_ptr<http_gate> gate,
               std::function<void(http_session*)> on_close);

  /// Starts reading the first request.
  void start();

  /// Writes a reply of `status` and closes: the refusal of a connection over the server's
  /// limit, before any request is read.
  void refuse(unsigned status, std::string body);

 private:
  using request_parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

  void read_request();
  void on_read(boost::beast::error_code ec);
  void dispatch_request();
  [[nodiscard]] http_respond responder();
  /// `header`: one more header line's name and value (Allow, WWW-Authenticate), if any.
  void write(http_reply reply, bool keep_alive,
             std::optional<std::pair<boost::beast::http::field, const char*>> header = {});
  /// True when no token is set, or the request carries it (compared in constant time).
  [[nodiscard]] bool authorized() const;
  void linger();
  void close();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<request_parser> parser_;
  const std::vector<http_route>& routes_;
  http_limits limits_;
  std::shared_ptr<http_gate> gate_;
  std::function<void(http_session*)> on_close_;
  std::vector<char> drain_;
  unsigned version_ = 11;
  bool keep_alive_ = false;
  bool closed_ = false;
};

}  // namespace uma::detail
