// `uma snapshot --html` opened in headless Chromium: the page's script ran and drew the chart,
// the region table (with the labels the workload allocated) and the filter box. Skipped with a
// reason where Chromium is missing (tools/setup.sh installs Debian's `chromium`).

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

namespace {

/// The first of Debian's and other distributions' names for Chromium on PATH, or empty.
std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"})
    if (std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0)
      return name;
  return {};
}

/// Runs `command` and returns its standard output.
std::string output_of(const std::string& command) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string out;
  if (!pipe)
    return out;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0)
    out.append(buffer.data(), n);
  return out;
}

class snapshot_page : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty())
      GTEST_SKIP() << "chromium is not installed (apt-get install chromium; tools/setup.sh "
                      "installs it): the rendered page cannot be checked";
    dir_ = std::filesystem::temp_directory_path() /
           std::string("uma_snapshot_page_").append(std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty())
      std::filesystem::remove_all(dir_);
  }

  /// The DOM after the page's scripts ran.
  std::string rendered(const std::filesystem::path& page) {
    std::string cmd = chromium_;
    cmd.append(" --headless --no-sandbox --disable-gpu --virtual-time-budget=5000 --dump-dom ")
        .append("'file://")
        .append(page.string())
        .append("' 2>/dev/null");
    return output_of(cmd);
  }

  std::string chromium_;
  std::filesystem::path dir_;
};

TEST_F(snapshot_page, ChromiumRendersTheChartTheRegionTableAndTheFilter) {
  const auto page = dir_ / "snapshot.html";
  const auto json = dir_ / "snapshot.json";
  std::string cmd = UMA_CLI_PATH;
  cmd.append(" snapshot --backend host --html ")
      .append(page.string())
      .append(" --json ")
      .append(json.string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto dom = rendered(page);
  ASSERT_FALSE(dom.empty()) << "chromium printed no DOM";
  // Rows the script built from the embedded data, not text of the static template.
  EXPECT_NE(dom.find("<td>weights</td>"), std::string::npos) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("<td>activations</td>"), std::string::npos);
  EXPECT_NE(dom.find("<path d=\"M"), std::string::npos) << "no stacked area in the chart";
  EXPECT_NE(dom.find("data-label=\"scratch\""), std::string::npos);
  EXPECT_NE(dom.find("id=\"filter\""), std::string::npos);
  EXPECT_NE(dom.find("live regions"), std::string::npos) << "the summary was not filled in";
  EXPECT_NE(dom.find("<td>prefetch</td>"), std::string::npos) << "no event rows";
  EXPECT_EQ(dom.find("<h2>Arbiter"), std::string::npos) << "a local allocator has no arbiter";
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("\"label\": \"weights\""), std::string::npos);
}

TEST(snapshot_cli, AnUnwritableFileIsNamedAndFailsTheCommand) {
  std::string cmd = UMA_CLI_PATH;
  cmd.append(" snapshot --backend host --html /nonexistent-dir/x.html 2>&1");
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(pipe);
  std::string out;
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0)
    out.append(buffer.data(), n);
  const int status = pclose(pipe.release());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_NE(out.find("could not write '/nonexistent-dir/x.html'"), std::string::npos) << out;
}

}  // namespace
