"""Fault injection into a running registry, a group's or a transaction coordinator's (and,
for a dropped connection, the gateway).

One module per fault; each module's docstring states the guarantee it checks. The fakes
(logs that fail, hang or crawl; an fsync that sleeps or blocks; a raising state machine) are
in helpers.py and in the modules that use them. Tests that need timers run on trio's
autojumping MockClock; the ones on the real DurableCoordinatorLog under `always` run on the
real clock, because a mock clock jumps while the log's fsync runs in a worker thread.

Each test was seen to fail with its guarantee broken: the mutation was applied to src, the
module run, and src restored (`git checkout src`); never committed.

The actor code they name is the actor base (actors/mailbox_actor.py, actor_registry.py):
each mutation below was applied to it again once the group and transaction actors became
machines plugged into that base, and each test still failed.

- test_step_raises::test_a_raising_step_fails_its_whole_batch_and_nothing_else
  mutation: MailboxActor._fail no longer answers what it holds (_answer_held) -> fails
  (TooSlowError: the failed batch's callers are never answered); mutation: _fail keeps the
  group as the failed batch left it instead of rebuilding it from the log -> fails (the
  unstored offset is visible: {0: 2, 1: 7} != {0: 2})
- test_step_raises::test_a_raising_step_answers_the_members_parked_in_the_rebalance
  same two mutations -> fails (TooSlowError: the parked JoinGroup is never answered; with
  no rebuild, a's heartbeat gets REBALANCE_IN_PROGRESS from a rebalance the log never saw)
- test_step_raises::test_requests_queued_behind_the_raising_step_in_its_batch_are_answered
  found a real bug (the envelopes after a raising step were never answered), fixed by
  holding every envelope of a batch before any is stepped; mutation: MailboxActor.turn holds
  each envelope only as it steps it (the old code) -> both cases fail
- test_log_write_fails::test_a_failed_write_acknowledges_nothing_of_its_batch
  mutation: MailboxActor._store swallows CoordinatorLogError -> fails (the five commits are
  acknowledged: [0, 0, 0, 0, 0] != [15] * 5)
- test_log_write_fails::test_a_write_refused_by_a_full_disk_is_not_acknowledged[always,never]
  same mutation -> both fail (the ENOSPC commit is answered 0 instead of 15)
- test_log_write_hangs::test_a_hung_write_is_answered_at_the_commit_timeout_and_reads_go_on
  mutation: MailboxActor._store without its move_on_after(commit_timeout_s) -> fails
  (TooSlowError: the hung commit's caller is never answered)
- test_log_write_hangs::test_a_durable_log_whose_fsync_hangs_fails_writes_in_time_and_...
  same mutation -> fails (TooSlowError after 10 s)
- test_slow_fsync::test_a_slow_fsync_delays_only_the_writes_and_is_shared_by_them
  mutation: DurableCoordinatorLog._write_and_sync fsyncs on the event loop instead of in
  its FsyncThread (trio.to_thread.run_sync before) -> fails ("not answered while the fsync
  ran"); mutation: the flusher takes one append per batch -> fails (5 fsyncs and batches
  instead of 2)
- test_connection_drops_mid_join::test_a_member_dropped_in_the_initial_delay_...[1, 5 ahead]
  mutation: MailboxActor._next_batch never wakes at the group's deadline -> fails
  (TooSlowError); mutation: timers.fire_due expires no session and _expire_pending_sync
  drops nobody -> fails (TooSlowError: b's SyncGroup waits forever for the gone leader)
- test_connection_drops_mid_join::test_a_new_member_dropped_mid_rebalance_...[1, 5 ahead]
  same two mutations -> fails (TooSlowError: b's slot is never cleaned up)
  (not a useful mutation: serve_connection no longer catching BrokenResourceError -- still
  passes, as sending to a closed memory stream succeeds and the broker's side ends on EOF)
- test_nursery_cancelled_mid_rebalance::test_cancelling_the_registry_answers_every_...
  mutation: MailboxActor._drain no longer answers what it holds -> fails (TooSlowError: the
  parked JoinGroup, SyncGroup and the commit mid-fsync are never answered); mutation: the
  flusher abandons its fsync thread when cancelled (abandon_on_cancel=True) -> fails (the
  order: the log starts closing before the fsync under way is done)
- test_mailbox_fills::test_a_full_mailbox_makes_callers_wait_and_answers_every_one_in_order
  [1, 2] mutation: ActorRegistry.ask posts with send_nowait (no waiting for room) -> fails
  (trio.WouldBlock raised to callers); mutation: MailboxActor._next_batch reverses the batch
  -> fails (the posting caller's last offset does not hold); [0] found a real bug (an idle
  actor stopped while senders waited on its unbuffered mailbox), fixed since: an idle actor
  takes what is queued or waiting before it stops; mutation: an idle actor stops without
  looking -> [0], [1], [2] and the test below fail
- test_mailbox_fills::test_an_actor_stopping_with_a_full_mailbox_answers_everyone_waiting
  mutation: MailboxActor._drain answers nothing queued (its loop over the mailbox skipped)
  -> fails (TooSlowError: the queued senders are never answered); the send_nowait mutation
  above -> fails (WouldBlock)
- test_grace_ends_as_a_commit_arrives::test_a_commit_at_the_end_of_the_grace_is_...
  mutation: MailboxActor._linger does not look at its mailbox again once the grace ran out
  -> fails (TooSlowError: a commit posted in that instant is left in the closed mailbox)
- test_share_consumer_drops_holding_records::test_what_a_dropped_consumer_held_goes_to_...
  mutation: MailboxActor._next_batch never wakes at the deadline -> fails (the locks are
  still Acquired when they expire: ((4, 9, 1, 1),) != ((4, 9, 0, 1),)); mutation:
  share_group/machine.py _timer releases no expired lock -> fails (the group's deadline
  stays past: its actor fires timers without end and the test times out)
- test_share_acquisition_write_fails::test_a_refused_acquisition_hands_nothing_out_and_...
  mutation: MailboxActor._store swallows CoordinatorLogError -> fails (the refused
  acquisition is answered NONE with records 5-9); mutation: MailboxActor._fail keeps the
  group instead of rebuilding it from the log -> fails (the consumer's heartbeat is NONE, not
  UNKNOWN_MEMBER_ID: the lost acquisition's locks live on)
- test_share_fetch_write_fails::test_a_refused_fetch_stores_neither_its_acks_nor_its_...
  mutation: MailboxActor._store swallows CoordinatorLogError -> fails (the refused one-turn
  ShareFetch is answered NONE with records 5-9)
- test_txn_marker_write_fails::test_a_marker_the_disk_refuses_is_retried_until_written_...
  mutation: TxnMachine._write_markers returns MarkersWritten whatever failed -> fails
  (CompleteCommit while the marker is not written); mutation: MarkerWriter.write ignores
  the partitions' error codes -> fails (the same)
- test_txn_registry_cancelled_mid_commit::test_cancelled_mid_commit_every_caller_is_...
  mutation: MailboxActor._drain no longer answers what it holds -> fails (TooSlowError: the
  EndTxn waiting for its store is never answered); mutation: MailboxActor.run starts no
  follow-up at start -> fails (TooSlowError: after the restart the stored PrepareCommit
  never gets its markers)

Not seen through these tests: MailboxActor._drain leaving the mailbox open (no
`self._inbox.close()`). Every sender waiting for room is drained before the close, and a
stopped actor is out of the registry before anyone can look it up again, so only a sender
holding the actor itself notices; tests/actors/test_group_actor.py's
test_stopping_actor_answers_everything_it_holds does.
"""
