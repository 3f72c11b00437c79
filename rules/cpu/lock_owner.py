"""Whose lock a lock-code sample spins on or waits for, from its stack; and that owner's remedy.

Lock code alone (``native_queued_spin_lock_slowpath``, ``futex_wait``, ``__lll_lock_wait``) does
not say whose lock it is: the frames around it do. The frames are walked from the leaf towards
the root and **the innermost frame that names an owner decides** (the code that took the lock is
nearer the lock than the code that got there): a NIC TX-queue lock taken in NAPI is the network
stack's even in a ``mariadbd`` thread the softirq interrupted; a futex under
``srw_mutex_impl<true>::wait_and_lock`` is InnoDB's; a futex under ``mmap``'s ``down_write`` is the
kernel's memory map lock. When no frame names one, the process does: a proxy (HAProxy, PgBouncer,
ProxySQL...), a database engine ("a user-space lock inside the database": its own mutexes or a
condition variable, the frames do not say which), else a kernel or user-space lock of that
process.

Owners (:data:`OWNERS`, in the order the patterns are tried within one frame)::

    network-tx      qdisc / NIC TX-queue lock   __dev_queue_xmit, sch_direct_xmit, virtnet_poll_tx, net_tx_action
    network-rx      NAPI receive path           net_rx_action, __napi_poll, virtnet_poll, napi_gro_receive
    network-socket  socket lock / TCP-IP stack  lock_sock_nested, release_sock, tcp_recvmsg, ip_finish_output2
    kernel-mm       mmap_lock, zone, LRU, page  do_mmap, __vm_munmap, lock_mm_and_find_vma, rmqueue_bulk, folio_lruvec_lock
    innodb          InnoDB mutex / rw-lock      ut_delay, srw_mutex_impl..., lock_sys_t::..., buf_pool_t::..., btr_search_...
    postgresql      LWLock / spinlock           LWLockAcquire, s_lock, GetSnapshotData, BufferAlloc, XLogInsertRecord

>>> owner_of(["net_rx_action", "__napi_poll", "virtnet_poll_tx", "_raw_spin_lock", "native_queued_spin_lock_slowpath"], "mariadbd", True)
('network-tx', 'virtnet_poll_tx')
>>> owner_of(["do_command", "ha_innobase::write_row", "srw_mutex_impl<true>::wait_and_lock", "syscall", "do_futex", "futex_wait"], "mariadbd", True)
('innodb', 'srw_mutex_impl<true>::wait_and_lock')
>>> owner_of(["start_thread", "[mariadbd]", "pthread_mutex_lock@@GLIBC_2.2.5", "__lll_lock_wait"], "mariadbd", True)
('database', None)
>>> owner_of(["main", "ev_loop", "pthread_mutex_lock", "__lll_lock_wait"], "haproxy", False)
('proxy', None)
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from dbdiag.patterns import lazy_compile

NETWORK_TX = "network-tx"
NETWORK_RX = "network-rx"
NETWORK_SOCKET = "network-socket"
KERNEL_MM = "kernel-mm"
INNODB = "innodb"
POSTGRESQL = "postgresql"
PROXY = "proxy"
DATABASE = "database"
KERNEL_OTHER = "kernel"
USER_OTHER = "user"

OWNERS: tuple[tuple[str, str], ...] = (
    (NETWORK_TX,
     r"__dev_queue_xmit|dev_queue_xmit\w*|__dev_xmit_skb|sch_direct_xmit|__qdisc_run|qdisc_run\w*|__qdisc_\w+|qdisc_\w+"
     r"|pfifo_fast_\w+|fq_codel_\w+|dev_hard_start_xmit|netif_tx_\w+|__netif_tx_\w+|net_tx_action|virtnet_poll_tx"
     r"|free_old_xmit\w*|\w+_start_xmit\w*|\w+_xmit_frame\w*|\w+_clean_tx_irq\w*|\w+_poll_tx\w*|\w+_tx_poll\w*|\w+_tx_complete\w*"),
    (NETWORK_RX,
     r"net_rx_action|__napi_poll|napi_\w+|virtnet_poll|virtnet_receive|receive_buf|\w+_clean_rx_irq\w*|\w+_poll_rx\w*"
     r"|netif_receive_skb\w*|__netif_receive_skb\w*|process_backlog|gro_\w+|dev_gro_receive|inet_gro_receive|tcp_gro_receive"),
    (NETWORK_SOCKET,
     r"lock_sock\w*|release_sock|__release_sock|sk_wait_data|tcp_\w+|__tcp_\w+|udp_\w+|__udp\w*|inet_\w+|inet6_\w+|__inet_\w+"
     r"|sock_\w+|__sock_\w+|sk_\w+|__sk_\w+|ip_\w+|__ip_\w+|ip6_\w+|skb_\w+|__skb_\w+|unix_\w+|nf_\w+|__nf_\w+|nft_\w+|ipt_\w+"
     r"|neigh_\w+|dst_\w+|__sys_(send|recv|accept|connect|shutdown)\w*|__x64_sys_(send|recv|accept|connect)\w*"),
    (KERNEL_MM,
     r"do_mmap|mmap_region|__mmap_region|vm_mmap_pgoff|ksys_mmap_pgoff|__vm_munmap|__do_munmap|do_vmi_\w*munmap|do_mprotect_pkey"
     r"|mprotect_fixup|do_brk_flags|__x64_sys_(mmap|munmap|mprotect|brk|madvise|mremap)|do_madvise\w*|lock_mm_and_find_vma"
     r"|mmap_(read|write)_lock\w*|down_read_killable|get_mmap_lock\w*|rmqueue\w*|free_pcppages_bulk|free_unref_page\w*"
     r"|free_unref_folios|get_page_from_freelist|__alloc_pages\w*|release_pages|folio_lruvec_lock\w*|lru_add_drain\w*"
     r"|folio_batch_move_lru|__pagevec_lru_add|pagevec_lru_move_fn|shrink_\w+|isolate_lru_\w+|folio_wait_bit\w*|__folio_lock\w*"
     r"|lock_page\w*|__lock_page\w*|compact_\w+|khugepaged\w*|migrate_pages\w*|change_protection\w*|zap_\w+|unmap_\w+"
     r"|exit_mmap|tlb_finish_mmu|flush_tlb\w*|page_vma_mapped_walk|rmap_walk\w*|try_to_unmap\w*"),
    (INNODB,
     r"ut_delay|PolicyMutex\b.*|TTAS\w*Mutex\b.*|sync_array_\w+|mutex_spin_wait|rw_lock_[sx]\w*"
     r"|(srw_mutex_impl|ssux_lock_impl|srw_lock_impl|sux_lock|srw_spin_lock\w*|ssux_lock|srw_lock|lock_sys_t|trx_sys_t|buf_pool_t"
     r"|log_t|mtr_t|trx_t|dict_sys_t|fil_system_t|purge_sys_t|ha_innobase)\b.*"
     r"|lock_(rec|table|trx|wait|release|grant|sys|deadlock)\w*|trx_\w+|buf_(page|pool|flush|LRU|block|read|buddy)\w*"
     r"|log_(write|flush|buffer|free_check|sys|checkpoint)\w*|btr_\w+|row_(search|ins|upd|sel|purge|vers|mysql|lock)\w*"
     r"|fil_\w+|fsp_\w+|ibuf_\w+|dict_\w+|innobase_\w+|os_event_\w+|srv_\w+"),
    (POSTGRESQL,
     r"LWLock\w*|s_lock\w*|perform_spin_delay|finish_spin_delay|PGSemaphore\w*|ProcArray\w*|GetSnapshotData\w*"
     r"|LockAcquire\w*|LockRelease\w*|LockBuffer\w*|BufferAlloc|BufTable\w*|StrategyGetBuffer|ReadBuffer\w*|XLogInsert\w*"
     r"|WALInsertLock\w*|XLogFlush|WaitXLogInsertionsToFinish|SimpleLru\w*|SlruSelectLRUPage|ConditionVariable\w*"),
)
PROXY_COMMS = r"haproxy|pgbouncer|proxysql|maxscale|odyssey|pgpool\S*|pgcat|envoy|nginx|mysqlrouter|mysql-router|tidb-proxy|traefik"
# Frames that are the lock itself or the way into the kernel: never the caller named in evidence.
NEUTRAL_FRAMES = (
    r"(native_|__pv_|pv_)?queued_\w*lock_slowpath|_raw_\w*(spin|read|write)_(un)?lock\w*|__mutex_\w+|mutex_\w+|osq_lock|rwsem_\w+"
    r"|__?down_\w+|down_(read|write)\w*|up_(read|write)|futex_\w+|__futex_\w+|do_futex|(__x64_sys|__arm64_sys|__se_sys|__do_sys)_\w+"
    r"|__lll_\w+|lll_\w+|_*pthread_\w+|__GI_\w+|syscall|entry_SYSCALL_64\w*|do_syscall_64|syscall_exit\w*|schedule\w*|__schedule"
    r"|finish_task_switch\w*|plist_\w+|get_futex_key|hash_futex|\[[^\]]*\]"
    # the engines' own lock primitives: they name the owner, their caller names the lock
    r"|ut_delay|PolicyMutex\b.*|TTAS\w*Mutex\b.*|sync_array_\w+|mutex_spin_wait|rw_lock_[sx]\w*"
    r"|(srw_mutex_impl|ssux_lock_impl|srw_lock_impl|sux_lock|srw_spin_lock\w*|ssux_lock|srw_lock)\b.*"
    r"|LWLock\w*|s_lock\w*|perform_spin_delay|finish_spin_delay|spin_delay|PGSemaphore\w*|pg_usleep"
    r"|__new_sem_\w+|__old_sem_\w+|sem_(wait|post|timedwait|clockwait)\w*|do_futex_wait\w*|__futex_abstimed_wait\w*"
)

_SUFFIX = lazy_compile(r"(\.(isra|constprop|part|cold|lto_priv|llvm)(\.\d+)?)+$|@@?[\w.]+$|@plt$")
_OWNER_RES = tuple((owner, lazy_compile(f"^(?:{pattern})$")) for owner, pattern in OWNERS)
_NEUTRAL_RE = lazy_compile(f"^(?:{NEUTRAL_FRAMES})$")
_PROXY_RE = lazy_compile(f"^(?:{PROXY_COMMS})$")


def _normalise(frame: str) -> str:
    return _SUFFIX.sub("", frame.strip())


def frame_owner(frame: str) -> str | None:
    """The owner a single frame names, if any."""
    name = _normalise(frame)
    for owner, pattern in _OWNER_RES:
        if pattern.match(name):
            return owner
    return None


def _naming_frame(frames: Sequence[str]) -> tuple[str | None, int]:
    """The owner named by the innermost frame that names one, and that frame's index (-1: none)."""
    for index in range(len(frames) - 1, -1, -1):
        owner = frame_owner(frames[index])
        if owner is not None:
            return owner, index
    return None, -1


def owner_of(frames: Sequence[str], comm: str | None, database: bool, leaf_kernel: bool | None = None) -> tuple[str, str | None]:
    """The owner of the lock one stack (root first) is in, and the frame that named it (None when the process did)."""
    owner, index = _naming_frame(frames)
    if owner is not None:
        return owner, frames[index]
    return process_owner(comm, database, leaf_kernel), None


def process_owner(comm: str | None, database: bool, leaf_kernel: bool | None) -> str:
    """The owner when no frame names one: a proxy, a database engine, else a kernel or user-space lock."""
    if comm and _PROXY_RE.match(comm.strip()):
        return PROXY
    if database:
        return DATABASE
    return KERNEL_OTHER if leaf_kernel else USER_OTHER


def caller_of(frames: Sequence[str]) -> str | None:
    """Who took the lock: the innermost frame, at or outside the one that named the owner, that is
    neither lock code nor the way into the kernel (``LockReleaseAll``, not the ``do_send_sig_info``
    of the ``kill`` it made; ``lock_sys_t::wr_lock``, not the ``srw_mutex_impl`` under it)."""
    _, index = _naming_frame(frames)
    for frame in reversed(frames[: index + 1] if index >= 0 else frames):
        if not _NEUTRAL_RE.match(_normalise(frame)):
            return frame
    return None


def owners(stacks: pl.DataFrame) -> pl.DataFrame:
    """Per lock stack (``comm``, ``stack``, ``samples``, ``weight``, optional ``database_process`` and
    ``leaf_kernel``): ``owner``, ``named_by`` (the frame that named it) and ``caller``.

    Each distinct stack is walked once (lock stacks are one category of the profile).
    """
    frame = stacks.with_columns(
        (pl.col("database_process") if "database_process" in stacks.columns else pl.lit(False)).fill_null(False).alias("_db"),
        (pl.col("leaf_kernel") if "leaf_kernel" in stacks.columns else pl.lit(None, pl.Boolean)).alias("_kernel"),
    )
    distinct = frame.select("comm", "stack", "_db", "_kernel").unique(maintain_order=True)
    named = []
    for comm, stack, database, kernel in distinct.iter_rows():
        frames = (stack or "").split(";")
        owner, by = owner_of(frames, comm, bool(database), kernel)
        named.append((comm, stack, database, kernel, owner, by, caller_of(frames)))
    table = pl.DataFrame(
        named, orient="row",
        schema={"comm": pl.String, "stack": pl.String, "_db": pl.Boolean, "_kernel": pl.Boolean,
                "owner": pl.String, "named_by": pl.String, "caller": pl.String},
    )
    return frame.join(table, on=["comm", "stack", "_db", "_kernel"], how="left", nulls_equal=True).drop("_db", "_kernel")
