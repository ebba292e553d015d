-- What each worker runs, as it reports it: `agentlab-sched worker` every 10 s, a plain `procrastinate
-- worker` (through the run middleware) when it runs an agentlab-sched job. `doctor` reads it: which
-- workers are alive, which queues they take, whether they fire, their concurrency and their clock.
CREATE TABLE agentlab_sched.workers (
    name text PRIMARY KEY,
    kind text NOT NULL CHECK (kind IN ('agentlab-sched', 'procrastinate')),
    -- Procrastinate's id of this worker (procrastinate_workers.id) once known; no foreign key: Procrastinate
    -- deletes the rows of workers that stopped.
    procrastinate_worker_id bigint,
    host text NOT NULL,
    pid integer NOT NULL,
    app text,
    -- NULL: every queue.
    queues text[],
    concurrency integer,
    -- Runs the precise loop (fires on time) / the notification dispatcher.
    fires boolean NOT NULL DEFAULT false,
    notifies boolean NOT NULL DEFAULT false,
    -- The worker's clock minus the database's, in seconds, at its last report.
    clock_skew double precision,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workers_seen_idx ON agentlab_sched.workers (seen_at);
