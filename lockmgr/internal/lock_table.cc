#include "lockmgr/internal/lock_table.h"

#include <algorithm>
#include <tuple>

#include "common/fail_points.h"

namespace tidepool::lockmgr::internal {
namespace {

bool holds(const LockRecord& lock) { return lock.state != LockState::waiting; }
bool queued(const LockRecord& lock) { return lock.state != LockState::granted; }
bool same_owner(const LockRecord& a, const LockRecord& b) {
  return !a.owner.none() && a.owner == b.owner;
}

// Conversions queue ahead of new requests; within each, the earlier position goes first.
std::tuple<int, std::uint64_t> queue_key(const LockRecord& lock) {
  return {static_cast<int>(lock.state), lock.position};
}

bool may_set_value(const LockRecord& lock) {
  return holds(lock) && (lock.granted == Mode::protected_write || lock.granted == Mode::exclusive);
}

void grant(LockRecord& lock) {
  lock.state = LockState::granted;
  lock.granted = lock.requested;
  lock.position = 0;
  lock.deadline_ms = 0;
}

// A queued conversion given up: the lock stays granted in the mode it had.
void keep_old_mode(LockRecord& lock) {
  lock.requested = lock.granted;
  lock.state = LockState::granted;
  lock.position = 0;
  lock.deadline_ms = 0;
}

}  // namespace

Status LockTable::request(const LockRequest& request, std::vector<Notice>& notices) {
  if (!request.range.valid()) return error(Errc::invalid_argument, "empty lock range");
  if (locks_.contains(request.id)) return error(Errc::invalid_argument, "lock id already in use");
  Resource& resource = resources_[request.resource];
  LockRecord lock{request.id, request.resource, request.range,          LockState::waiting,
                  Mode::null, request.mode,     resource.next_position, request.deadline_ms};
  lock.owner = request.owner;
  if (grantable(resource, lock)) {
    if (request.expandable && resource.locks.empty()) lock.range = kWholeResource;
    grant(lock);
    notices.push_back(Granted{lock.id, lock.granted, lock.range, resource.value});
    resource.locks.push_back(lock);
    locks_.emplace(lock.id, request.resource);
    return {};
  }
  if (request.try_only) {
    notices.push_back(Refused{lock.id, Refusal::would_block, in_the_way(resource, lock)});
    warn_holders_in_the_way(resource, lock, notices);
    return {};
  }
  locks_.emplace(lock.id, request.resource);
  resource.locks.push_back(lock);
  enqueue(resource, resource.locks.back(), notices);
  settle(request.resource, resource, notices);
  return {};
}

Status LockTable::convert(LockId id, Mode mode, bool try_only, std::uint64_t deadline_ms,
                          std::optional<LockValue> value, std::vector<Notice>& notices) {
  Resource* resource = resource_of(id);
  if (resource == nullptr) return error(Errc::not_found, "no such lock");
  LockRecord& lock = *find_in(*resource, id);
  if (lock.state != LockState::granted) {
    return error(Errc::precondition_failed, "the lock is not granted");
  }
  const Conversion kind = conversion(lock.granted, mode);
  if (value) {
    if (!may_set_value(lock) || kind == Conversion::up) {
      return error(Errc::invalid_argument, "only a PW or EX holder converting down sets the value");
    }
    resource->value = *value;
  }
  const ResourceName name = locks_.at(id);
  if (kind != Conversion::up) {
    lock.granted = lock.requested = mode;
    resource->warned.erase(id);
    notices.push_back(Granted{id, mode, lock.range, resource->value});
    settle(name, *resource, notices);
    return {};
  }
  lock.requested = mode;
  lock.state = LockState::converting;
  lock.position = resource->next_position;
  if (grantable(*resource, lock)) {
    grant(lock);
    resource->warned.erase(id);
    notices.push_back(Granted{id, mode, lock.range, resource->value});
    settle(name, *resource, notices);
    return {};
  }
  if (waits_for_it(*resource, lock)) {
    keep_old_mode(lock);
    notices.push_back(Refused{id, Refusal::deadlock});
    return {};
  }
  if (try_only) {
    LockRecord asked = lock;
    keep_old_mode(lock);
    notices.push_back(Refused{id, Refusal::would_block});
    warn_holders_in_the_way(*resource, asked, notices);
    return {};
  }
  lock.deadline_ms = deadline_ms;
  enqueue(*resource, lock, notices);
  settle(name, *resource, notices);
  return {};
}

Status LockTable::release(LockId id, std::optional<LockValue> value, std::vector<Notice>& notices) {
  Resource* resource = resource_of(id);
  if (resource == nullptr) return error(Errc::not_found, "no such lock");
  if (value) {
    if (!may_set_value(*find_in(*resource, id))) {
      return error(Errc::invalid_argument, "only a PW or EX holder sets the value");
    }
    resource->value = *value;
  }
  const ResourceName name = locks_.at(id);
  remove(*resource, id);
  settle(name, *resource, notices);
  return {};
}

Status LockTable::cancel(LockId id, std::vector<Notice>& notices) {
  Resource* resource = resource_of(id);
  if (resource == nullptr) return error(Errc::not_found, "no such lock");
  if (!queued(*find_in(*resource, id))) {
    return error(Errc::precondition_failed, "nothing queued to cancel: the lock is granted");
  }
  withdraw(locks_.at(id), *resource, id, Refusal::cancelled, notices);
  return {};
}

std::uint64_t LockTable::expire(std::uint64_t now_ms, std::vector<Notice>& notices) {
  std::vector<std::pair<ResourceName, LockId>> due;
  std::uint64_t next = 0;
  for (const ResourceName& name : contended_) {
    for (const LockRecord& lock : resources_.at(name).locks) {
      if (!queued(lock) || lock.deadline_ms == 0) continue;
      if (lock.deadline_ms <= now_ms) {
        due.emplace_back(name, lock.id);
      } else if (next == 0 || lock.deadline_ms < next) {
        next = lock.deadline_ms;
      }
    }
  }
  std::sort(due.begin(), due.end());
  for (const auto& [name, id] : due) {
    // Withdrawing one may have granted another that was due as well: that one stays granted.
    auto found = resources_.find(name);
    if (found == resources_.end() || !locks_.contains(id)) continue;
    if (queued(*find_in(found->second, id))) {
      withdraw(name, found->second, id, Refusal::timed_out, notices);
    }
  }
  return next;
}

void LockTable::remind(std::vector<Notice>& notices) {
  std::vector<ResourceName> names(contended_.begin(), contended_.end());
  std::sort(names.begin(), names.end());
  for (const ResourceName& name : names) {
    Resource& resource = resources_.at(name);
    for (const LockRecord& lock : resource.locks) {
      if (queued(lock)) warn_holders_in_the_way(resource, lock, notices, true);
    }
  }
}

void LockTable::drop_node(cluster::NodeId node, std::vector<Notice>& notices) {
  std::vector<ResourceName> touched;
  for (auto it = locks_.begin(); it != locks_.end();) {
    if (it->first.node != node) {
      ++it;
      continue;
    }
    Resource& resource = resources_.at(it->second);
    std::erase_if(resource.locks, [&](const LockRecord& lock) { return lock.id == it->first; });
    resource.warned.erase(it->first);
    touched.push_back(it->second);
    it = locks_.erase(it);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (const ResourceName& name : touched) settle(name, resources_.at(name), notices);
}

Status LockTable::adopt(const LockRecord& record) {
  if (!record.range.valid()) return error(Errc::invalid_argument, "empty lock range");
  if (locks_.contains(record.id)) return error(Errc::invalid_argument, "lock id already in use");
  if (record.state == LockState::granted && record.requested != record.granted) {
    return error(Errc::invalid_argument, "a granted lock with a conversion");
  }
  Resource& resource = resources_[record.resource];
  if (holds(record)) {
    for (const LockRecord& other : resource.locks) {
      if (holds(other) && other.range.overlaps(record.range) && !same_owner(other, record) &&
          !compatible(other.granted, record.granted)) {
        return error(Errc::internal, "two nodes report conflicting grants");
      }
    }
    bool writer = may_set_value(record);
    bool first_holder = std::none_of(resource.locks.begin(), resource.locks.end(), holds);
    if (first_holder || (writer && !resource.value_from_writer)) {
      resource.value = record.value;
      resource.value_from_writer = writer;
    }
  }
  resource.locks.push_back(record);
  LockRecord& adopted = resource.locks.back();
  if (queued(adopted) && adopted.position == 0) adopted.position = resource.next_position;
  resource.next_position = std::max(resource.next_position, adopted.position + 1);
  locks_.emplace(record.id, record.resource);
  return {};
}

void LockTable::settle(std::vector<Notice>& notices) {
  std::vector<ResourceName> names;
  names.reserve(resources_.size());
  for (const auto& entry : resources_) names.push_back(entry.first);
  std::sort(names.begin(), names.end());
  for (const ResourceName& name : names) {
    Resource& resource = resources_.at(name);
    // Adopted conversions may wait for each other in a way no single conversion was let
    // into: refuse the later of each such pair, as convert() would have refused it.
    std::sort(resource.locks.begin(), resource.locks.end(),
              [](const LockRecord& a, const LockRecord& b) { return queue_key(a) < queue_key(b); });
    for (LockRecord& lock : resource.locks) {
      if (lock.state != LockState::converting || !waits_for_it(resource, lock)) continue;
      keep_old_mode(lock);
      notices.push_back(Refused{lock.id, Refusal::deadlock});
    }
    settle(name, resource, notices);
  }
}

std::optional<LockRecord> LockTable::find(LockId id) const {
  auto name = locks_.find(id);
  if (name == locks_.end()) return std::nullopt;
  const Resource& resource = resources_.at(name->second);
  for (LockRecord lock : resource.locks) {
    if (lock.id != id) continue;
    lock.value = resource.value;
    return lock;
  }
  return std::nullopt;
}

std::vector<LockRecord> LockTable::records() const {
  std::vector<LockRecord> all;
  all.reserve(locks_.size());
  for (const auto& [name, resource] : resources_) {
    for (LockRecord lock : resource.locks) {
      lock.value = resource.value;
      all.push_back(lock);
    }
  }
  std::sort(all.begin(), all.end(), [](const LockRecord& a, const LockRecord& b) {
    return std::tie(a.resource, a.state, a.position, a.id) <
           std::tie(b.resource, b.state, b.position, b.id);
  });
  return all;
}

LockTable::Resource* LockTable::resource_of(LockId id) {
  auto name = locks_.find(id);
  return name == locks_.end() ? nullptr : &resources_.at(name->second);
}

LockRecord* LockTable::find_in(Resource& resource, LockId id) {
  for (LockRecord& lock : resource.locks) {
    if (lock.id == id) return &lock;
  }
  return nullptr;
}

void LockTable::remove(Resource& resource, LockId id) {
  std::erase_if(resource.locks, [id](const LockRecord& lock) { return lock.id == id; });
  resource.warned.erase(id);
  locks_.erase(id);
}

void LockTable::withdraw(ResourceName name, Resource& resource, LockId id, Refusal reason,
                         std::vector<Notice>& notices) {
  LockRecord& lock = *find_in(resource, id);
  if (lock.state == LockState::converting) {
    keep_old_mode(lock);
  } else {
    remove(resource, id);
  }
  notices.push_back(Refused{id, reason});
  settle(name, resource, notices);
}

void LockTable::enqueue(Resource& resource, LockRecord& lock, std::vector<Notice>& notices) {
  lock.position = resource.next_position++;
  notices.push_back(Queued{lock.id, lock.position});
}

bool LockTable::grantable(const Resource& resource, const LockRecord& lock) const {
  for (const LockRecord& other : resource.locks) {
    if (other.id == lock.id || !other.range.overlaps(lock.range) || same_owner(other, lock)) {
      continue;
    }
    if (holds(other) && !compatible(other.granted, lock.requested) &&
        !fail_points::switched_on(fail_points::kGrantOverHeldLocks)) {
      return false;
    }
    if (lock.owner.none() && queued(other) && queue_key(other) < queue_key(lock) &&
        !compatible(other.requested, lock.requested)) {
      return false;
    }
  }
  return true;
}

std::optional<Conflict> LockTable::in_the_way(const Resource& resource, const LockRecord& lock) {
  for (const LockRecord& other : resource.locks) {
    if (other.id != lock.id && holds(other) && other.range.overlaps(lock.range) &&
        !same_owner(other, lock) && !compatible(other.granted, lock.requested)) {
      return Conflict{other.range, other.granted, other.owner};
    }
  }
  return std::nullopt;
}

bool LockTable::waits_for_it(const Resource& resource, const LockRecord& conversion) const {
  for (const LockRecord& other : resource.locks) {
    if (other.id == conversion.id || other.state != LockState::converting ||
        same_owner(other, conversion) || queue_key(conversion) < queue_key(other) ||
        !other.range.overlaps(conversion.range)) {
      continue;
    }
    bool other_waits_for_this = !compatible(conversion.granted, other.requested);
    bool this_waits_for_other = !compatible(other.granted, conversion.requested) ||
                                !compatible(other.requested, conversion.requested);
    if (other_waits_for_this && this_waits_for_other) return true;
  }
  return false;
}

void LockTable::warn_holders_in_the_way(Resource& resource, const LockRecord& wanting,
                                        std::vector<Notice>& notices, bool again) {
  for (const LockRecord& holder : resource.locks) {
    if (holder.id == wanting.id || !holds(holder) || !holder.owner.none() ||
        !holder.range.overlaps(wanting.range) || compatible(holder.granted, wanting.requested)) {
      continue;
    }
    auto [warned, first] = resource.warned.try_emplace(holder.id, holder.granted);
    if (!first && warned->second == holder.granted && !again) continue;
    warned->second = holder.granted;
    notices.push_back(Blocking{holder.id, wanting.requested, wanting.range});
  }
}

void LockTable::settle(ResourceName name, Resource& resource, std::vector<Notice>& notices) {
  std::sort(resource.locks.begin(), resource.locks.end(),
            [](const LockRecord& a, const LockRecord& b) { return queue_key(a) < queue_key(b); });
  for (LockRecord& lock : resource.locks) {
    if (!queued(lock) || !grantable(resource, lock)) continue;
    grant(lock);
    resource.warned.erase(lock.id);
    notices.push_back(Granted{lock.id, lock.granted, lock.range, resource.value});
  }
  bool contended = false;
  for (const LockRecord& lock : resource.locks) {
    if (!queued(lock)) continue;
    contended = true;
    warn_holders_in_the_way(resource, lock, notices);
  }
  if (contended) {
    contended_.insert(name);
  } else {
    contended_.erase(name);
  }
  if (resource.locks.empty()) resources_.erase(name);
}

}  // namespace tidepool::lockmgr::internal
