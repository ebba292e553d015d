-- The schedules under a resolver's lease (resolving_until set while a worker checks its launch; cleared when
-- the plan is applied), by due time: the precise loop's sleep query reads them after every tick. Through
-- the due index the planner, which cannot see the due bound it passes, estimated a third of all schedules
-- and, at a million, started two parallel workers at every call; this index holds the few leased ones.
CREATE INDEX schedules_leased_idx ON agentlab_sched.schedules (next_run_at) WHERE resolving_until IS NOT NULL;
