// What the store's tests share.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tidepool::store::internal {

// Runs one store coroutine to completion on a private io_context.
template <typename T>
T run_to_completion(boost::asio::awaitable<T> op) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, std::move(op), boost::asio::use_future);
  io.run();
  return future.get();
}

// An empty directory of the running test's own: tests run as parallel processes.
inline std::filesystem::path fresh_test_directory(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "-" + std::to_string(::getpid()) + "-" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace tidepool::store::internal
