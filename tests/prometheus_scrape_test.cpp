// A real Prometheus server (Debian's `prometheus`, /usr/bin/prometheus) scrapes a
// uma::metrics_endpoint on 127.0.0.1, and its query API returns what uma reported. Skipped
// with a reason where the program is missing; tools/setup.sh test installs it.

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include <boost/json/parse.hpp>

#include <uma/actors/metrics/metrics_endpoint.hpp>
#include "support/actor_fixture.hpp"
#include "support/child_process.hpp"
#include "support/http_client.hpp"

namespace uma {
namespace {

constexpr const char* prometheus_path = "/usr/bin/prometheus";

/// A loopback port free at the time of asking (the kernel's choice for port 0).
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// A scratch directory, removed with everything in it.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "uma-prom-XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~temp_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

/// The first result of an instant query through Prometheus's HTTP API, as its text value;
/// empty while Prometheus has none (not started yet, not scraped yet).
std::string query(std::uint16_t port, const std::string& expr) {
  try {
    const auto r = test::http_get(port, "/api/v1/query?query=" + expr);
    if (r.status != 200)
      return {};
    const auto doc = boost::json::parse(r.body);
    const auto& result = doc.at("data").at("result").as_array();
    if (result.empty())
      return {};
    return std::string(result[0].at("value").as_array()[1].as_string());
  } catch (const std::exception&) {
    return {};  // refused connection while it starts, or a half-written reply
  }
}

using PrometheusScrape = test::actor_fixture;

TEST_F(PrometheusScrape, APrometheusServerScrapesTheLiveBytesUmaReports) {
  if (::access(prometheus_path, X_OK) != 0)
    GTEST_SKIP() << prometheus_path << " is missing (Debian package prometheus; "
                 << "tools/setup.sh test installs it)";
  std::vector<ManagedRef<float>> held;
  for (const std::size_t floats : {1000u, 50'000u, 300'000u})
    held.push_back(uma_->allocate<float>(floats, {.label = "scraped"}));
  const auto live = uma_->stats().live_bytes;
  ASSERT_GT(live, 0u);
  metrics_endpoint endpoint(sys_, uma_->handle(), {.labels = true});

  temp_dir dir;
  const auto web_port = free_port();
  std::ofstream(dir.path / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
      << "scrape_configs:\n  - job_name: uma\n    static_configs:\n"
      << "      - targets: ['127.0.0.1:" << endpoint.port() << "']\n";
  test::child_process prometheus(
      {prometheus_path, "--config.file=" + (dir.path / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir.path / "data").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(web_port), "--log.level=warn"});

  // Bounded: poll the query API until the first scrape has landed.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  std::string value;
  while (value.empty() && std::chrono::steady_clock::now() < deadline) {
    value = query(web_port, "uma_live_bytes");
    if (value.empty())
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // poll interval
  }
  ASSERT_FALSE(value.empty()) << "Prometheus did not scrape 127.0.0.1:" << endpoint.port()
                              << " within 90 s";
  EXPECT_EQ(value, std::to_string(live));
  EXPECT_EQ(query(web_port, "up%7Bjob%3D%22uma%22%7D"), "1");
  EXPECT_EQ(query(web_port, "uma_label_live_regions%7Blabel%3D%22scraped%22%7D"), "3");
}

}  // namespace
}  // namespace uma
