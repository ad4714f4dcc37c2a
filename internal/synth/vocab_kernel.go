package synth

// Kernel vocabulary: call paths written root to leaf, one frame per ";"
// separated element. A "module/" prefix places the function in a loadable
// module instead of vmlinux. The names are real kallsyms names from 6.x
// kernels; the chains are plausible call paths, not traces of one build.

// kernelModules are the kernel mappings besides vmlinux, with their text
// sizes and paths below /lib/modules/<release>/kernel.
var kernelModules = []struct {
	name, path string
	size       uint64
}{
	{"ext4", "fs/ext4/ext4.ko", 0xd4000},
	{"jbd2", "fs/jbd2/jbd2.ko", 0x1e000},
	{"xfs", "fs/xfs/xfs.ko", 0x2c8000},
	{"overlay", "fs/overlayfs/overlay.ko", 0x3a000},
	{"nf_conntrack", "net/netfilter/nf_conntrack.ko", 0x2a000},
	{"nf_tables", "net/netfilter/nf_tables.ko", 0x5e000},
	{"veth", "drivers/net/veth.ko", 0x9000},
	{"virtio_net", "drivers/net/virtio_net.ko", 0x14000},
}

const (
	kernelEntry   = "entry_SYSCALL_64_after_hwframe;do_syscall_64"
	kernelSched   = "schedule;__schedule;finish_task_switch.isra.0"
	kernelKthread = "ret_from_fork_asm;ret_from_fork;kthread"
)

// syscallClass is the kernel side of a system call: call paths below
// do_syscall_64 that a running thread can be caught in (cpu) and paths that
// end in the scheduler, for off-CPU samples (block).
type syscallClass struct {
	cpu   []string
	block []string
}

var syscallClasses = map[string]syscallClass{
	"read_sock": {
		cpu: []string{
			"__x64_sys_read;ksys_read;vfs_read;sock_read_iter;sock_recvmsg;inet_recvmsg;tcp_recvmsg;tcp_recvmsg_locked;skb_copy_datagram_iter;__skb_datagram_iter;simple_copy_to_iter;_copy_to_iter;rep_movs_alternative",
			"__x64_sys_read;ksys_read;vfs_read;sock_read_iter;sock_recvmsg;inet_recvmsg;tcp_recvmsg;tcp_recvmsg_locked;tcp_cleanup_rbuf;__tcp_cleanup_rbuf;tcp_send_ack;__tcp_send_ack.part.0;__tcp_transmit_skb;__ip_queue_xmit;ip_output;ip_finish_output2;__dev_queue_xmit;dev_hard_start_xmit;veth/veth_xmit;__netif_rx;netif_rx_internal;enqueue_to_backlog",
		},
		block: []string{
			"__x64_sys_read;ksys_read;vfs_read;sock_read_iter;sock_recvmsg;inet_recvmsg;tcp_recvmsg;tcp_recvmsg_locked;sk_wait_data;wait_woken;schedule_timeout;" + kernelSched,
		},
	},
	"recv": {
		cpu: []string{
			"__x64_sys_recvfrom;__sys_recvfrom;sock_recvmsg;inet_recvmsg;tcp_recvmsg;tcp_recvmsg_locked;skb_copy_datagram_iter;__skb_datagram_iter;simple_copy_to_iter;_copy_to_iter;rep_movs_alternative",
			"__x64_sys_recvfrom;__sys_recvfrom;sock_recvmsg;inet_recvmsg;tcp_recvmsg;lock_sock_nested;_raw_spin_lock_bh",
			"__x64_sys_recvfrom;__sys_recvfrom;sock_recvmsg;unix_dgram_recvmsg;__unix_dgram_recvmsg;__skb_try_recv_datagram;skb_copy_datagram_iter;__skb_datagram_iter",
		},
		block: []string{
			"__x64_sys_recvfrom;__sys_recvfrom;sock_recvmsg;inet_recvmsg;tcp_recvmsg;tcp_recvmsg_locked;sk_wait_data;wait_woken;schedule_timeout;" + kernelSched,
		},
	},
	"write_sock": {
		cpu: []string{
			"__x64_sys_write;ksys_write;vfs_write;sock_write_iter;sock_sendmsg;tcp_sendmsg;tcp_sendmsg_locked;tcp_push;__tcp_push_pending_frames;tcp_write_xmit;__tcp_transmit_skb;__ip_queue_xmit;ip_output;ip_finish_output;__ip_finish_output;ip_finish_output2;__dev_queue_xmit;dev_hard_start_xmit;veth/veth_xmit;__netif_rx;netif_rx_internal;enqueue_to_backlog",
			"__x64_sys_write;ksys_write;vfs_write;sock_write_iter;sock_sendmsg;tcp_sendmsg;tcp_sendmsg_locked;tcp_push;__tcp_push_pending_frames;tcp_write_xmit;__tcp_transmit_skb;__ip_queue_xmit;__ip_local_out;nf_hook_slow;nf_conntrack/ipv4_conntrack_local;nf_conntrack/nf_conntrack_in;nf_conntrack/resolve_normal_ct;nf_conntrack/__nf_conntrack_find_get",
			"__x64_sys_write;ksys_write;vfs_write;sock_write_iter;sock_sendmsg;tcp_sendmsg;tcp_sendmsg_locked;_copy_from_iter;rep_movs_alternative",
			"__x64_sys_writev;do_writev;vfs_writev;do_iter_readv_writev;sock_write_iter;sock_sendmsg;tcp_sendmsg;tcp_sendmsg_locked;tcp_push;__tcp_push_pending_frames;tcp_write_xmit;__tcp_transmit_skb;__ip_queue_xmit;__ip_local_out;nf_hook_slow;nf_tables/nft_do_chain_ipv4;nf_tables/nft_do_chain;nf_tables/nft_rhash_lookup",
		},
		block: []string{
			"__x64_sys_write;ksys_write;vfs_write;sock_write_iter;sock_sendmsg;tcp_sendmsg;tcp_sendmsg_locked;sk_stream_wait_memory;wait_woken;schedule_timeout;" + kernelSched,
		},
	},
	"send": {
		cpu: []string{
			"__x64_sys_sendto;__sys_sendto;sock_sendmsg;udp_sendmsg;udp_send_skb;ip_send_skb;ip_local_out;ip_output;ip_finish_output;__ip_finish_output;ip_finish_output2;__dev_queue_xmit;dev_hard_start_xmit;veth/veth_xmit",
			"__x64_sys_sendmsg;__sys_sendmsg;___sys_sendmsg;____sys_sendmsg;sock_sendmsg;unix_dgram_sendmsg;sock_alloc_send_pskb;alloc_skb_with_frags;__alloc_skb;kmalloc_reserve;__kmalloc_node_track_caller",
		},
	},
	"epoll": {
		cpu: []string{
			"__x64_sys_epoll_wait;do_epoll_wait;ep_poll;ep_send_events;ep_item_poll.isra.0;sock_poll;tcp_poll",
			"__x64_sys_epoll_pwait;do_epoll_pwait.part.0;do_epoll_wait;ep_poll;ep_send_events;__put_user_8",
		},
		block: []string{
			"__x64_sys_epoll_wait;do_epoll_wait;ep_poll;schedule_hrtimeout_range;schedule_hrtimeout_range_clock;" + kernelSched,
			"__x64_sys_epoll_pwait;do_epoll_pwait.part.0;do_epoll_wait;ep_poll;schedule_hrtimeout_range;schedule_hrtimeout_range_clock;" + kernelSched,
		},
	},
	"poll": {
		cpu: []string{
			"__x64_sys_poll;do_sys_poll;do_poll.constprop.0;sock_poll;unix_poll",
			"__x64_sys_pselect6;do_pselect.constprop.0;core_sys_select;do_select;sock_poll;tcp_poll",
		},
		block: []string{
			"__x64_sys_poll;do_sys_poll;do_poll.constprop.0;poll_schedule_timeout.constprop.0;schedule_hrtimeout_range;schedule_hrtimeout_range_clock;" + kernelSched,
			"__x64_sys_pselect6;do_pselect.constprop.0;core_sys_select;do_select;poll_schedule_timeout.constprop.0;schedule_hrtimeout_range;schedule_hrtimeout_range_clock;" + kernelSched,
		},
	},
	"futex_wait": {
		cpu: []string{
			"__x64_sys_futex;do_futex;futex_wait;__futex_wait;futex_wait_setup;futex_q_lock;_raw_spin_lock",
			"__x64_sys_futex;do_futex;futex_wait;__futex_wait;futex_wait_setup;get_futex_key",
		},
		block: []string{
			"__x64_sys_futex;do_futex;futex_wait;__futex_wait;futex_wait_queue;" + kernelSched,
		},
	},
	"futex_wake": {
		cpu: []string{
			"__x64_sys_futex;do_futex;futex_wake;wake_up_q;try_to_wake_up;ttwu_queue_wakelist;__smp_call_single_queue;send_call_function_single_ipi;native_send_call_func_single_ipi;default_send_IPI_single_phys",
			"__x64_sys_futex;do_futex;futex_wake;wake_up_q;try_to_wake_up;select_task_rq_fair;select_idle_sibling;available_idle_cpu",
			"__x64_sys_futex;do_futex;futex_wake;wake_up_q;try_to_wake_up;_raw_spin_unlock_irqrestore",
		},
	},
	"sleep": {
		cpu: []string{
			"__x64_sys_clock_nanosleep;common_nsleep;hrtimer_nanosleep;do_nanosleep;hrtimer_start_range_ns;_raw_spin_unlock_irqrestore",
		},
		block: []string{
			"__x64_sys_clock_nanosleep;common_nsleep;hrtimer_nanosleep;do_nanosleep;" + kernelSched,
			"__x64_sys_nanosleep;hrtimer_nanosleep;do_nanosleep;" + kernelSched,
		},
	},
	"read_file": {
		cpu: []string{
			"__x64_sys_read;ksys_read;vfs_read;ext4/ext4_file_read_iter;generic_file_read_iter;filemap_read;copy_page_to_iter;_copy_to_iter;rep_movs_alternative",
			"__x64_sys_pread64;vfs_read;xfs/xfs_file_read_iter;xfs/xfs_file_buffered_read;filemap_read;filemap_get_pages;filemap_get_read_batch",
			"__x64_sys_read;ksys_read;vfs_read;overlay/ovl_read_iter;vfs_iter_read;do_iter_read;ext4/ext4_file_read_iter;generic_file_read_iter;filemap_read;filemap_get_pages;filemap_get_read_batch",
			"__x64_sys_read;ksys_read;vfs_read;seq_read;seq_read_iter;show_stat;seq_put_decimal_ull_width",
		},
		block: []string{
			"__x64_sys_pread64;vfs_read;xfs/xfs_file_read_iter;xfs/xfs_file_buffered_read;filemap_read;filemap_get_pages;filemap_update_page;folio_wait_bit_common;io_schedule;" + kernelSched,
		},
	},
	"write_file": {
		cpu: []string{
			"__x64_sys_write;ksys_write;vfs_write;ext4/ext4_file_write_iter;ext4/ext4_buffered_write_iter;generic_perform_write;ext4/ext4_da_write_begin;__filemap_get_folio;filemap_add_folio;__filemap_add_folio",
			"__x64_sys_pwrite64;vfs_write;xfs/xfs_file_write_iter;xfs/xfs_file_buffered_write;iomap_file_buffered_write;iomap_write_iter;copy_page_from_iter_atomic;rep_movs_alternative",
			"__x64_sys_write;ksys_write;vfs_write;pipe_write;__wake_up_common_lock;__wake_up_common;autoremove_wake_function;try_to_wake_up",
			"__x64_sys_write;ksys_write;vfs_write;overlay/ovl_write_iter;vfs_iter_write;do_iter_write;ext4/ext4_file_write_iter;ext4/ext4_buffered_write_iter;generic_perform_write;copy_page_from_iter_atomic",
		},
		block: []string{
			"__x64_sys_write;ksys_write;vfs_write;ext4/ext4_file_write_iter;ext4/ext4_buffered_write_iter;generic_perform_write;balance_dirty_pages_ratelimited_flags;balance_dirty_pages;io_schedule_timeout;schedule_timeout;" + kernelSched,
		},
	},
	"fsync": {
		cpu: []string{
			"__x64_sys_fdatasync;do_fsync;ext4/ext4_sync_file;file_write_and_wait_range;__filemap_fdatawrite_range;do_writepages;ext4/ext4_writepages;ext4/ext4_do_writepages;ext4/mpage_prepare_extent_to_map",
		},
		block: []string{
			"__x64_sys_fdatasync;do_fsync;ext4/ext4_sync_file;jbd2/jbd2_complete_transaction;jbd2/jbd2_log_wait_commit;" + kernelSched,
			"__x64_sys_fsync;do_fsync;xfs/xfs_file_fsync;xfs/xfs_log_force_seq;xfs/xlog_wait_on_iclog;" + kernelSched,
		},
	},
	"open": {
		cpu: []string{
			"__x64_sys_openat;do_sys_openat2;do_filp_open;path_openat;link_path_walk.part.0.constprop.0;walk_component;lookup_fast;__d_lookup_rcu",
			"__x64_sys_openat;do_sys_openat2;do_filp_open;path_openat;do_open;vfs_open;do_dentry_open;overlay/ovl_open;overlay/ovl_open_realfile;open_with_fake_path;do_dentry_open;ext4/ext4_file_open",
			"__x64_sys_openat;do_sys_openat2;getname_flags.part.0;strncpy_from_user",
		},
	},
	"stat": {
		cpu: []string{
			"__x64_sys_newfstatat;vfs_fstatat;vfs_statx;filename_lookup;path_lookupat;link_path_walk.part.0.constprop.0;inode_permission;generic_permission",
			"__x64_sys_statx;do_statx;vfs_statx;filename_lookup;path_lookupat;walk_component;lookup_fast;__d_lookup_rcu",
			"__x64_sys_newfstatat;vfs_fstatat;vfs_statx;filename_lookup;path_lookupat;walk_component;overlay/ovl_lookup;overlay/ovl_lookup_layer;lookup_one_unlocked",
		},
	},
	"mmap": {
		cpu: []string{
			"__x64_sys_mmap;ksys_mmap_pgoff;vm_mmap_pgoff;do_mmap;mmap_region;vm_area_alloc;kmem_cache_alloc",
			"__x64_sys_munmap;__vm_munmap;do_vmi_munmap;do_vmi_align_munmap;unmap_region;unmap_vmas;unmap_single_vma;unmap_page_range;zap_pmd_range.isra.0;zap_pte_range;tlb_flush_mmu;free_pages_and_swap_cache;release_pages",
			"__x64_sys_madvise;do_madvise.part.0;madvise_vma_behavior;madvise_dontneed_free;zap_page_range_single;unmap_page_range;zap_pmd_range.isra.0;zap_pte_range",
		},
	},
	"accept": {
		cpu: []string{
			"__x64_sys_accept4;__sys_accept4;do_accept;sock_alloc_file;alloc_file_pseudo;alloc_empty_file;init_file;security_file_alloc",
			"__x64_sys_accept4;__sys_accept4;do_accept;inet_accept;inet_csk_accept;release_sock",
		},
		block: []string{
			"__x64_sys_accept4;__sys_accept4;do_accept;inet_accept;inet_csk_accept;inet_csk_wait_for_connect;schedule_timeout;" + kernelSched,
		},
	},
	"getrandom": {
		cpu: []string{"__x64_sys_getrandom;get_random_bytes_user;chacha_block_generic;chacha_permute"},
	},
	"yield": {
		cpu: []string{"__x64_sys_sched_yield;do_sched_yield;schedule;__schedule;pick_next_task_fair;update_curr"},
	},
}

// kernelInterrupts are on-CPU paths that can sit on top of any stack:
// interrupts, softirqs run on irq exit, and page faults.
var kernelInterrupts = []string{
	"asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt;__sysvec_apic_timer_interrupt;hrtimer_interrupt;__hrtimer_run_queues;tick_nohz_highres_handler;tick_sched_handle;update_process_times;scheduler_tick;task_tick_fair;update_curr",
	"asm_sysvec_apic_timer_interrupt;sysvec_apic_timer_interrupt;irq_exit_rcu;__irq_exit_rcu;__do_softirq;run_rebalance_domains;rebalance_domains;load_balance;find_busiest_group;update_sd_lb_stats.constprop.0",
	"asm_common_interrupt;common_interrupt;irq_exit_rcu;__irq_exit_rcu;__do_softirq;net_rx_action;__napi_poll;virtio_net/virtnet_poll;virtio_net/virtnet_receive;virtio_net/receive_buf;napi_gro_receive;dev_gro_receive;inet_gro_receive;tcp4_gro_receive;tcp_gro_receive",
	"asm_common_interrupt;common_interrupt;irq_exit_rcu;__irq_exit_rcu;__do_softirq;net_rx_action;__napi_poll;process_backlog;__netif_receive_skb_one_core;ip_rcv;ip_rcv_finish;ip_local_deliver;ip_local_deliver_finish;ip_protocol_deliver_rcu;tcp_v4_rcv;tcp_v4_do_rcv;tcp_rcv_established;tcp_data_queue;sock_def_readable;__wake_up_sync_key",
	"asm_sysvec_call_function_single;sysvec_call_function_single;__sysvec_call_function_single;__flush_smp_call_function_queue;sched_ttwu_pending;ttwu_do_activate;enqueue_task_fair",
	"asm_exc_page_fault;exc_page_fault;do_user_addr_fault;handle_mm_fault;__handle_mm_fault;handle_pte_fault;do_anonymous_page;vma_alloc_folio;alloc_pages_mpol;__alloc_pages;get_page_from_freelist;clear_page_erms",
	"asm_exc_page_fault;exc_page_fault;do_user_addr_fault;handle_mm_fault;__handle_mm_fault;handle_pte_fault;do_fault;do_read_fault;filemap_map_pages;next_uptodate_folio",
	"asm_exc_page_fault;exc_page_fault;do_user_addr_fault;handle_mm_fault;__handle_mm_fault;handle_pte_fault;do_wp_page;wp_page_copy;__wp_page_copy_user;copy_page",
}

// kthreadRoots are the bodies of kernel threads below kthread().
var kthreadBodies = map[string]syscallClass{
	"kworker": {
		cpu: []string{
			"worker_thread;process_one_work;vmstat_update;refresh_cpu_vm_stats;__mod_zone_page_state",
			"worker_thread;process_one_work;wb_workfn;wb_do_writeback;wb_writeback;__writeback_inodes_wb;writeback_sb_inodes;__writeback_single_inode;do_writepages;ext4/ext4_writepages;ext4/ext4_do_writepages;ext4/mpage_prepare_extent_to_map;filemap_get_folios_tag",
			"worker_thread;process_one_work;ext4/ext4_end_io_rsv_work;ext4/ext4_do_flush_completed_IO.isra.0;ext4/ext4_convert_unwritten_io_end_vec;ext4/ext4_convert_unwritten_extents;ext4/ext4_map_blocks",
			"worker_thread;process_one_work;xfs/xfs_end_io;xfs/xfs_end_ioend;xfs/xfs_iomap_write_unwritten;xfs/xfs_trans_commit;xfs/__xfs_trans_commit;xfs/xlog_cil_commit",
			"worker_thread;process_one_work;nf_conntrack/gc_worker;nf_conntrack/nf_ct_gc_expired;nf_conntrack/nf_ct_delete",
			"worker_thread;process_one_work;drain_local_pages_wq;drain_pages;drain_pages_zone;free_pcppages_bulk",
			"worker_thread;process_one_work;virtio_net/refill_work;virtio_net/try_fill_recv;virtio_net/add_recvbuf_mergeable;virtqueue_add_inbuf_ctx",
			"worker_thread;process_one_work;flush_to_ldisc;tty_port_default_receive_buf;receive_buf;n_tty_receive_buf_common",
		},
		block: []string{"worker_thread;" + kernelSched},
	},
	"ksoftirqd": {
		cpu: []string{
			"smpboot_thread_fn;run_ksoftirqd;__do_softirq;net_rx_action;__napi_poll;virtio_net/virtnet_poll;virtio_net/virtnet_receive;virtio_net/receive_buf;napi_gro_receive;dev_gro_receive;inet_gro_receive;tcp4_gro_receive;tcp_gro_receive",
			"smpboot_thread_fn;run_ksoftirqd;__do_softirq;net_rx_action;__napi_poll;process_backlog;__netif_receive_skb_one_core;ip_rcv;nf_hook_slow;nf_conntrack/ipv4_conntrack_in;nf_conntrack/nf_conntrack_in;nf_conntrack/nf_conntrack_tcp_packet",
			"smpboot_thread_fn;run_ksoftirqd;__do_softirq;net_rx_action;__napi_poll;process_backlog;__netif_receive_skb_one_core;ip_rcv;ip_rcv_finish;ip_forward;ip_forward_finish;ip_output;nf_hook_slow;nf_tables/nft_do_chain_ipv4;nf_tables/nft_do_chain",
			"smpboot_thread_fn;run_ksoftirqd;__do_softirq;rcu_core;rcu_do_batch;kmem_cache_free;__slab_free",
			"smpboot_thread_fn;run_ksoftirqd;__do_softirq;run_timer_softirq;__run_timers;call_timer_fn;delayed_work_timer_fn;__queue_work",
		},
		block: []string{"smpboot_thread_fn;" + kernelSched},
	},
	"kswapd": {
		cpu: []string{
			"kswapd;balance_pgdat;shrink_node;shrink_node_memcgs;shrink_lruvec;shrink_inactive_list;shrink_folio_list;__remove_mapping",
			"kswapd;balance_pgdat;shrink_node;shrink_slab;do_shrink_slab;super_cache_scan;prune_icache_sb;list_lru_walk_one;inode_lru_isolate",
		},
		block: []string{"kswapd;kswapd_try_to_sleep;" + kernelSched},
	},
	"jbd2": {
		cpu: []string{
			"jbd2/kjournald2;jbd2/jbd2_journal_commit_transaction;submit_bh_wbc;submit_bio;submit_bio_noacct_nocheck;__submit_bio;blk_mq_submit_bio;blk_mq_insert_request",
			"jbd2/kjournald2;jbd2/jbd2_journal_commit_transaction;jbd2/jbd2_journal_write_metadata_buffer;jbd2/jbd2_journal_file_buffer",
		},
		block: []string{
			"jbd2/kjournald2;" + kernelSched,
			"jbd2/kjournald2;jbd2/jbd2_journal_commit_transaction;jbd2/jbd2_journal_wait_updates;" + kernelSched,
		},
	},
	"xfsaild": {
		cpu:   []string{"xfs/xfsaild;xfs/xfsaild_push;xfs/xfs_inode_item_push;xfs/xfs_iflush_cluster;xfs/xfs_iflush"},
		block: []string{"xfs/xfsaild;schedule_timeout;" + kernelSched},
	},
	"rcu": {
		cpu:   []string{"rcu_gp_kthread;rcu_gp_fqs_loop;force_qs_rnp;rcu_implicit_dynticks_qs"},
		block: []string{"rcu_gp_kthread;rcu_gp_fqs_loop;schedule_timeout;" + kernelSched},
	},
	"kcompactd": {
		cpu:   []string{"kcompactd;kcompactd_do_work;compact_zone;isolate_migratepages;isolate_migratepages_block"},
		block: []string{"kcompactd;schedule_timeout;" + kernelSched},
	},
}
