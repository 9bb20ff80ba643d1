// uma::metrics_endpoint through real sockets on 127.0.0.1: what it serves, what it refuses.

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <uma/actors/allocator_supervisor.hpp>
#include <uma/actors/metrics/metrics_endpoint.hpp>
#include "support/actor_fixture.hpp"
#include "support/http_client.hpp"
#include "tools/snapshot_json.hpp"

namespace uma {
namespace {

using test::http_connection;
using test::http_get;

/// Checks `text` against the text exposition format 0.0.4 as uma writes it: every sample's
/// family has exactly one HELP and one TYPE line before its samples, sample lines are
/// `name{label="value",...} number`. Returns what is wrong, empty when nothing is.
std::string exposition_errors(const std::string& text) {
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? -?[0-9]+(\.[0-9]+)?$)");
  static const std::regex type_line(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)$)");
  std::set<std::string> helped, typed;
  std::istringstream in(text);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ")) {
      const auto name = line.substr(7, line.find(' ', 7) - 7);
      if (!helped.insert(name).second)
        return "two HELP lines for " + name;
    } else if (std::regex_match(line, m, type_line)) {
      if (!helped.contains(m[1]) || !typed.insert(m[1]).second)
        return "TYPE without HELP, or twice: " + line;
    } else if (std::regex_match(line, m, sample)) {
      if (!typed.contains(m[1]))
        return "sample before its TYPE: " + line;
    } else {
      return "not exposition format: '" + line + "'";
    }
  }
  return typed.empty() ? "no families" : "";
}

/// The value of the sample whose name and labels start with `prefix`; -1 when none.
double sample_value(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(prefix))
      return std::stod(line.substr(line.rfind(' ') + 1));
  return -1;
}

class MetricsEndpoint : public test::actor_fixture {
 protected:
  metrics_endpoint_config config() {
    return {.read_timeout = std::chrono::milliseconds(300), .labels = true};
  }
};

TEST_F(MetricsEndpoint, ServesTheAllocatorsCountersAsPrometheusText) {
  std::vector<ManagedRef<float>> held;
  for (int i = 0; i < 3; ++i)
    held.push_back(uma_->allocate<float>(1000, {.label = "frames"}));
  metrics_endpoint endpoint(sys_, uma_->handle(), config());
  const auto r = http_get(endpoint.port(), "/metrics");
  ASSERT_EQ(r.status, 200) << r.head;
  EXPECT_NE(r.head.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << r.head;
  EXPECT_EQ(exposition_errors(r.body), "") << r.body;
  const auto live = uma_->stats().live_bytes;
  EXPECT_GT(live, 0u);
  EXPECT_EQ(sample_value(r.body, "uma_live_bytes{backend=\"host\",generation=\"1\"}"),
            static_cast<double>(live));
  EXPECT_EQ(sample_value(r.body,
                         "uma_label_live_regions{backend=\"host\",generation=\"1\","
                         "label=\"frames\"}"),
            3.0);
}

TEST_F(MetricsEndpoint, LeavesTheLabelFamiliesOutUnlessAskedFor) {
  auto ref = uma_->allocate<float>(1000, {.label = "frames"});
  metrics_endpoint endpoint(sys_, uma_->handle());
  const auto r = http_get(endpoint.port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body.find("uma_label_"), std::string::npos) << r.body;
}

TEST_F(MetricsEndpoint, AddsTheResidencyAccountWhenTheAllocatorHasDevicesToBudget) {
  auto none = host_config();
  none.backend.instance = std::make_shared<host_backend>(emulated_devices{0, 0});
  EXPECT_EQ(http_get(metrics_endpoint(sys_, make_client(none)->handle()).port(), "/metrics")
                .body.find("uma_residency_"),
            std::string::npos);  // no devices: no residency families
  auto c = host_config();
  c.backend.instance = std::make_shared<host_backend>(emulated_devices{1, 64 << 20});
  auto with_devices = make_client(c);
  with_devices->device_budget(0, 16 << 20);
  auto ref = client::erase(with_devices->allocate<std::byte>(4 << 20));
  (void)with_devices->will_access({ref}, 0, access_mode::read);
  metrics_endpoint endpoint(sys_, with_devices->handle(), config());
  const auto r = http_get(endpoint.port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(exposition_errors(r.body), "") << r.body;
  const std::string base = "{backend=\"host\",generation=\"1\"";
  EXPECT_EQ(sample_value(r.body, "uma_residency_resident_bytes" + base + ",device=\"0\"}"),
            4.0 * (1 << 20));
  EXPECT_EQ(sample_value(r.body, "uma_residency_budget_bytes" + base + ",device=\"0\"}"),
            16.0 * (1 << 20));
  EXPECT_EQ(sample_value(r.body, "uma_residency_bytes_total" + base + ",move=\"to_device\"}"),
            4.0 * (1 << 20));
}

TEST_F(MetricsEndpoint, OverASupervisorAddsItsCountersAndState) {
  const auto supervisor = spawn_supervisor(sys_, {.allocator = host_config()});
  metrics_endpoint endpoint(sys_, supervisor, config());
  const auto r = http_get(endpoint.port(), "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(exposition_errors(r.body), "") << r.body;
  EXPECT_EQ(sample_value(r.body,
                         "uma_supervisor_state{backend=\"host\",generation=\"1\","
                         "state=\"running\"}"),
            1.0);
  EXPECT_EQ(sample_value(r.body, "uma_supervisor_restarts_total{"), 0.0);
  caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
}

TEST_F(MetricsEndpoint, HealthzIsOkWhileTheAllocatorAnswersAnd503OnceItStopped) {
  metrics_endpoint endpoint(sys_, uma_->handle(), config());
  const auto ok = http_get(endpoint.port(), "/healthz");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "ok\n");
  uma_->stop();
  const auto down = http_get(endpoint.port(), "/healthz");
  EXPECT_EQ(down.status, 503);
  EXPECT_NE(down.body.find("unhealthy: stats: "), std::string::npos) << down.body;
  EXPECT_EQ(http_get(endpoint.port(), "/metrics").status, 503);
}

TEST_F(MetricsEndpoint, ServesTheSnapshotAsJsonWhenGivenARendererAnd503OnceStopped) {
  auto cfg = config();
  cfg.snapshot_json = [](const allocator_snapshot& s) { return cli::to_json(s); };
  metrics_endpoint endpoint(sys_, uma_->handle(), cfg);
  {
    auto w = uma_->allocate<float>(16, {.label = "weights"});
    const auto r = http_get(endpoint.port(), "/snapshot");
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.head.find("application/json"), std::string::npos) << r.head;
    EXPECT_NE(r.body.find("\"label\": \"weights\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("\"kind\": \"allocate\""), std::string::npos) << r.body;
  }
  uma_->stop();
  const auto down = http_get(endpoint.port(), "/snapshot");
  EXPECT_EQ(down.status, 503);
  EXPECT_NE(down.body.find("uma: the allocator is stopped: "), std::string::npos) << down.body;
}

TEST_F(MetricsEndpoint, AnswersAnUnknownPathWith404NamingTheServedOnes) {
  metrics_endpoint endpoint(sys_, uma_->handle(), config());
  const auto r = http_get(endpoint.port(), "/snapshot");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("/metrics, /healthz"), std::string::npos) << r.body;
}

TEST_F(MetricsEndpoint, RefusesAnythingButGetWith405AndAllowGet) {
  metrics_endpoint endpoint(sys_, uma_->handle(), config());
  http_connection c(endpoint.port());
  c.send("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
  const auto r = c.read_response();
  EXPECT_EQ(r.status, 405);
  EXPECT_NE(r.head.find("Allow: GET"), std::string::npos) << r.head;
}

TEST_F(MetricsEndpoint, WithABearerTokenAnswersOnlyRequestsCarryingIt) {
  auto cfg = config();
  cfg.bearer_token = "s3cret-token-of-the-scraper";
  auto ref = uma_->allocate<float>(1000, {.label = "tenant-a"});
  metrics_endpoint endpoint(sys_, uma_->handle(), cfg);
  const auto ask = [&](const std::string& authorization) {
    http_connection c(endpoint.port());
    c.send("GET /metrics HTTP/1.1\r\nHost: x\r\n" + authorization + "Connection: close\r\n\r\n");
    return c.read_response();
  };
  for (const std::string bad : {"", "Authorization: Bearer wrong\r\n",
                                "Authorization: Bearer s3cret-token-of-the-scrapeR\r\n",
                                "Authorization: Basic s3cret-token-of-the-scraper\r\n",
                                "Authorization: Bearer s3cret-token-of-the-scraper-and-more\r\n"}) {
    const auto r = ask(bad);
    EXPECT_EQ(r.status, 401) << bad;
    EXPECT_NE(r.head.find("WWW-Authenticate: Bearer"), std::string::npos) << r.head;
    EXPECT_EQ(r.body.find("tenant-a"), std::string::npos) << r.body;  // no label leaks
  }
  const auto ok = ask("Authorization: Bearer s3cret-token-of-the-scraper\r\n");
  ASSERT_EQ(ok.status, 200) << ok.head;
  EXPECT_NE(ok.body.find("label=\"tenant-a\""), std::string::npos) << ok.body;
}

TEST_F(MetricsEndpoint, ReadsTheLabelsAtMostOncePerInterval) {
  const auto label_families = [](const metrics_endpoint& endpoint) {
    const auto r = http_get(endpoint.port(), "/metrics");
    return r.body.find("label=\"second\"") != std::string::npos;
  };
  auto first = uma_->allocate<float>(1000, {.label = "first"});
  auto cached_cfg = config();
  cached_cfg.labels_interval = std::chrono::hours(1);
  metrics_endpoint cached(sys_, uma_->handle(), cached_cfg);
  auto every_cfg = config();
  every_cfg.labels_interval = std::chrono::milliseconds(0);
  metrics_endpoint every(sys_, uma_->handle(), every_cfg);
  EXPECT_FALSE(label_families(cached));  // read now, kept for the interval
  EXPECT_FALSE(label_families(every));
  auto second = uma_->allocate<float>(1000, {.label = "second"});
  EXPECT_FALSE(label_families(cached)) << "a region report within the interval";
  EXPECT_TRUE(label_families(every)) << "an interval of 0 reads the labels every scrape";
  // The counters themselves are read every scrape: only the labels wait.
  const auto r = http_get(cached.port(), "/metrics");
  EXPECT_EQ(sample_value(r.body, "uma_live_regions{backend=\"host\",generation=\"1\"}"),
            static_cast<double>(uma_->stats().live_regions));
}

TEST_F(MetricsEndpoint, RefusesAMalformedRequestWith400) {
  metrics_endpoint endpoint(sys_, uma_->handle(), config());
  http_connection c(endpoint.port());
  c.send("GARBAGE\r\n\r\n");
  const auto r = c.read_response();
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("malformed request"), std::string::npos) << r.body;
}

TEST_F(MetricsEndpoint, RefusesAnOversizedHeaderWith413AndStillServesOthers) {
  auto cfg = config();
  cfg.max_request_bytes = 1024;
  metrics_endpoint endpoint(sys_, uma_->handle(), cfg);
  http_connection c(endpoint.port());
  c.send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Padding: " + std::string(4000, 'a') + "\r\n\r\n");
  const auto r = c.read_response();
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("at most 1024 bytes"), std::string::npos) << r.body;
  EXPECT_EQ(http_get(endpoint.port(), "/healthz").status, 200);
}

TEST_F(MetricsEndpoint, RefusesConnectionsBeyondTheLimitWith503) {
  auto cfg = config();
  cfg.max_connections = 2;
  cfg.read_timeout = std::chrono::seconds(30);
  metrics_endpoint endpoint(sys_, uma_->handle(), cfg);
  // Two kept-alive connections, each known to be accepted because it was answered.
  http_connection a(endpoint.port()), b(endpoint.port());
  for (auto* c : {&a, &b}) {
    c->send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(c->read_response().status, 200);
  }
  http_connection third(endpoint.port());
  const auto refused = third.read_response();
  EXPECT_EQ(refused.status, 503);
  EXPECT_NE(refused.body.find("too many connections (at most 2)"), std::string::npos);
  EXPECT_TRUE(third.closed_by_peer());
  // The kept-alive ones still work.
  a.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(a.read_response().status, 200);
}

TEST_F(MetricsEndpoint, ClosesAConnectionIdlePastTheReadTimeout) {
  metrics_endpoint endpoint(sys_, uma_->handle(), config());  // 300 ms
  http_connection idle(endpoint.port());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(idle.closed_by_peer());  // recv's own deadline is 10 s
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(MetricsEndpoint, RefusesABadConfigurationNamingWhatIsWrong) {
  UMA_EXPECT_ERROR(metrics_endpoint(sys_, uma_->handle(), {.address = ""}), errc::invalid_argument,
                   "empty address");
  UMA_EXPECT_ERROR(metrics_endpoint(sys_, uma_->handle(), {.address = "not an address!"}),
                   errc::invalid_argument, "not an address!");
  metrics_endpoint taken(sys_, uma_->handle(), config());
  UMA_EXPECT_ERROR(metrics_endpoint(sys_, uma_->handle(), {.port = taken.port()}),
                   errc::backend_error, "cannot listen on 127.0.0.1:");
}

}  // namespace
}  // namespace uma
