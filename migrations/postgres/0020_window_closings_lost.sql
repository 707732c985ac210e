-- 031: a window-closing row left `running` by a process that died is marked `lost` once its
-- claim is older than the nudge worker's bound (it counts as sent: never sent again, since the
-- send may have happened). The sweep costs the running rows, not the table.
CREATE INDEX window_closings_running_claimed ON window_closings (claimed_at) WHERE status = 'running';
