#pragma once

// A child process for the multi-process tests: started with fork+exec, its stdout on a pipe the
// test reads line by line with a deadline, its stderr shared with the test's. The destructor
// kills (SIGKILL) and reaps it, so no test leaves a process behind, whatever it asserts; the
// child also dies with the test process (PR_SET_PDEATHSIG).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace uma::test {

class child_process {
 public:
  /// Starts `argv[0]` with `argv`. Throws std::runtime_error when it cannot be started.
  explicit child_process(std::vector<std::string> argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      close(fds[0]);
      close(fds[1]);
      throw std::runtime_error("fork failed");
    }
    if (pid_ == 0) {
      // Only async-signal-safe calls between fork and exec (the parent has threads).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent)
        _exit(127);
      dup2(fds[1], STDOUT_FILENO);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  ~child_process() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
    if (out_ >= 0)
      close(out_);
  }

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  /// The next line of the child's stdout (without the newline), or nullopt when the child
  /// closed it or `timeout` passed first.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        auto line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char chunk[4096];
      const auto n = read(out_, chunk, sizeof chunk);
      if (n <= 0)
        return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  /// Everything the child writes to stdout until it closes it or `timeout` passes.
  std::string read_all(std::chrono::milliseconds timeout) {
    std::string out;
    while (auto line = read_line(timeout))
      out += *line + "\n";
    return out + std::exchange(buffer_, {});
  }

  /// Sends `sig`.
  void signal(int sig) const { ::kill(pid_, sig); }

  /// Waits up to `timeout` for the child to end; its wait status, or nullopt if it still runs.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    if (status_)
      return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        status_ = status;
        return status_;
      }
      if (r < 0 || std::chrono::steady_clock::now() >= deadline)
        return std::nullopt;
      usleep(5000);
    }
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

}  // namespace uma::test
