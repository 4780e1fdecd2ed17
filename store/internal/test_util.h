// What the store's tests share.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

namespace tidepool::store::internal {

// Runs one store coroutine to completion on a private io_context.
template <typename T>
T run_to_completion(boost::asio::awaitable<T> op) {
  boost::asio::io_context io;
  auto future = boost::asio::co_spawn(io, std::move(op), boost::asio::use_future);
  io.run();
  return future.get();
}

}  // namespace tidepool::store::internal
