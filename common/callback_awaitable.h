// Awaiting an operation that reports through a callback run exactly once, on any thread: the
// cluster layer's and the lock manager's, which run on their own loop.
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <utility>

namespace tidepool {

// `start(callback)` begins the operation; the coroutine resumes with the value the callback
// receives, on the coroutine's own executor.
template <typename T, typename Start>
boost::asio::awaitable<T> await_callback(Start start) {
  auto initiate = [start = std::move(start)](auto handler) mutable {
    auto shared = std::make_shared<decltype(handler)>(std::move(handler));
    start([shared](T value) mutable {
      auto executor = boost::asio::get_associated_executor(*shared);
      boost::asio::post(
          executor, [shared, value = std::move(value)]() mutable { (*shared)(std::move(value)); });
    });
  };
  auto operation = boost::asio::async_initiate<decltype(boost::asio::use_awaitable), void(T)>(
      std::move(initiate), boost::asio::use_awaitable);
  co_return co_await std::move(operation);
}

}  // namespace tidepool
