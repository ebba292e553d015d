-- Jobs, as `agentlab-sched worker` takes and finishes them (agentlab_sched/worker/batch.py); the functions are
-- in database/sql/57_batch_jobs.sql.

-- name: fetch_jobs
-- Take up to %(wanted)s jobs of %(queues)s (NULL: every queue) for worker %(worker)s, each with its run's context.
SELECT * FROM agentlab_sched.fetch_jobs(%(queues)s::character varying[], %(worker)s, %(wanted)s)

-- name: finish_jobs
-- Finish the jobs %(ids)s with %(statuses)s (deleting those marked in %(deletes)s), keeping first the
-- results %(results)s of the runs %(runs)s they ran (where set); the jobs that were not todo or doing.
SELECT agentlab_sched.finish_jobs(%(ids)s::bigint[], %(statuses)s::procrastinate_job_status[],
                                  %(deletes)s::boolean[], %(runs)s::uuid[], %(results)s::jsonb[]) AS missing

-- name: listen_channel
-- Be woken by new jobs and abort requests of a queue (Procrastinate's channel names).
LISTEN {channel}

-- name: ping
-- Is the connection alive (a LISTEN connection that heard nothing for a while)?
SELECT 1
