//===- FileUtils.cpp - writing output files safely -----------------------===//

#include "tessera/Runtime/FileUtils.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <system_error>
#include <unistd.h>

#ifdef __linux__
#include <fcntl.h>
#endif

namespace tessera::runtime {

llvm::Error writeFileAtomically(llvm::StringRef path, llvm::StringRef data, unsigned mode) {
  auto fail = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status) &&
      !llvm::sys::fs::is_regular_file(status)) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return fail("cannot write '" + path + "': " + ec.message());
    os << data;
    return llvm::Error::success();
  }
  llvm::SmallString<256> tmp;
  int fd;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%", fd, tmp, llvm::sys::fs::OF_None, mode))
    return fail("cannot create a file next to '" + path + "': " + ec.message());
  // Removed if the process dies of a signal or a fatal error meanwhile.
  llvm::sys::RemoveFileOnSignal(tmp);
  llvm::scope_exit forget([&] { llvm::sys::DontRemoveFileOnSignal(tmp); });
#ifdef __linux__
  // Its blocks allocated now: ext4 writes out a file renamed over another
  // with blocks still to allocate in the rename itself (its replace-by-
  // rename heuristic), which a 100 MB executable pays for in tenths of a
  // second. Where the file system cannot, nothing happens.
  (void)::fallocate(fd, 0, 0, static_cast<off_t>(data.size()));
#endif
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << data;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return fail("cannot write '" + tmp + "' (disk full?)");
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return fail("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
  return llvm::Error::success();
}

namespace {
/// Why the file or directory with `status` is not this user's alone (empty
/// when it is), naming it as `what`.
std::string whyNotOwnersAlone(const llvm::sys::fs::file_status &status, const std::string &what,
                              bool stickyDirectoryTrusted) {
  using namespace llvm::sys::fs;
  unsigned owner = status.getUser();
  if (owner != ::geteuid() && owner != 0)
    return what + " is owned by another user (uid " + std::to_string(owner) + ")";
  perms mode = status.permissions();
  if (stickyDirectoryTrusted && (mode & sticky_bit))
    return "";
  char octal[8];
  std::snprintf(octal, sizeof(octal), "%o", static_cast<unsigned>(mode & all_perms));
  if (mode & others_write)
    return what + " is writable by every user (mode " + octal + ")";
  if (mode & group_write)
    return what + " is writable by its group (mode " + octal + ")";
  return "";
}
} // namespace

namespace {
/// whyUntrusted's check of `path` (absolute) and each directory above it,
/// as the path names them: links on the way are followed.
std::string whyUntrustedOnPath(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (!llvm::sys::fs::status(path, status, /*follow=*/false)) {
    // A link may be replaced by whoever owns it; what it leads to is
    // judged on its own path (whyUntrusted).
    if (status.type() == llvm::sys::fs::file_type::symlink_file) {
      unsigned owner = status.getUser();
      if (owner != ::geteuid() && owner != 0)
        return "'" + path.str() + "' is a link owned by another user (uid " +
               std::to_string(owner) + ")";
    } else if (std::string why = whyNotOwnersAlone(status, "'" + path.str() + "'", false);
               !why.empty()) {
      return why;
    }
  }
  // The directories above it: whoever may rename entries in one of them
  // may put another directory or file in its place. A sticky one (/tmp)
  // lets each user rename only their own.
  for (llvm::StringRef dir = llvm::sys::path::parent_path(path); !dir.empty();
       dir = llvm::sys::path::parent_path(dir)) {
    if (llvm::sys::fs::status(dir, status))
      continue; // not there yet: it will be created with the cache
    if (std::string why = whyNotOwnersAlone(status, "the directory above it, '" + dir.str() + "',",
                                            /*stickyDirectoryTrusted=*/true);
        !why.empty())
      return why;
  }
  return "";
}
} // namespace

std::string whyUntrusted(llvm::StringRef path) {
  llvm::SmallString<256> absolute(path);
  if (llvm::sys::fs::make_absolute(absolute))
    return ("cannot find where '" + path + "' is").str();
  llvm::sys::path::remove_dots(absolute, /*remove_dot_dot=*/false);
  if (std::string why = whyUntrustedOnPath(absolute); !why.empty())
    return why;
  // Where the path leads once every link on it is resolved: the file read.
  llvm::SmallString<256> real;
  if (llvm::sys::fs::exists(absolute) && !llvm::sys::fs::real_path(absolute, real) &&
      real != absolute)
    return whyUntrustedOnPath(real);
  return "";
}

std::string untrustedCacheMessage(llvm::StringRef path, llvm::StringRef why) {
  return ("refusing the cache at '" + path + "': " + why +
          ". A cache holds native code that Tessera runs, so no one but you may be able to "
          "write it: use a cache directory of your own, or make this one yours alone "
          "(chown -R you, chmod -R go-w)")
      .str();
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readRegularFile(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return fail("cannot read '" + path + "': " + ec.message());
  if (!llvm::sys::fs::is_regular_file(status))
    return fail("cannot read '" + path + "': not a regular file (devices, pipes and "
                "directories are not read)");
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return fail("cannot read '" + path + "': " + file.getError().message());
  return std::move(*file);
}

namespace {
const char *toolName = "tessera";

/// Reports "<tool>: error: <parts...>" with one write(2) (several threads may
/// fail at once; the first one reports) without allocating (the heap may be
/// what ran out), removes the temporary files of outputs being written, and
/// exits with status 1.
[[noreturn]] void reportAndExit(std::initializer_list<const char *> parts) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true))
    for (;;)
      ::pause(); // the first thread's _exit ends this one too
  char message[1024] = {0};
  auto append = [&](const char *text) {
    if (text)
      std::strncat(message, text, sizeof(message) - std::strlen(message) - 2);
  };
  append(toolName);
  append(": error: ");
  for (const char *part : parts)
    append(part);
  append("\n");
  if (ssize_t ignored = ::write(2, message, std::strlen(message)))
    (void)ignored;
  llvm::sys::RunInterruptHandlers(); // removes half-written temporary files
  ::_exit(1);
}

[[noreturn]] void outOfMemory(const char *detail) {
  reportAndExit({"out of memory (", detail ? detail : "", "); nothing was written. "
                 "Give the process more memory (ulimit -v), or compile a smaller batch"});
}
} // namespace

void installResourceErrorHandlers(const char *tool) {
  toolName = tool;
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *reason, bool) { outOfMemory(reason); });
  // LLVM's fatal errors (a thread it cannot start) would abort.
  llvm::install_fatal_error_handler([](void *, const char *reason, bool) {
    reportAndExit({reason, "; nothing was written (out of memory or threads? give "
                           "the process more)"});
  });
  std::set_new_handler([] { outOfMemory("an allocation failed"); });
  // Threads that cannot be created, or memory that cannot be had, surface
  // as exceptions no one catches: report those as a lack of resources;
  // anything else is a bug, left to abort with its backtrace.
  static std::terminate_handler previous = std::set_terminate([] {
    if (std::exception_ptr current = std::current_exception()) {
      try {
        std::rethrow_exception(current);
      } catch (const std::bad_alloc &) {
        outOfMemory("an allocation failed");
      } catch (const std::system_error &e) {
        reportAndExit({"out of system resources (", e.what(),
                       "); nothing was written. Give the process more memory or threads"});
      } catch (...) {
      }
    }
    previous();
  });
}

} // namespace tessera::runtime
