package axtype

import "time"

// HistoryRow is one recorded transition. From is "" for the row written
// when the instance was created.
type HistoryRow struct {
	ID         int64     `json:"id"`
	InstanceID int64     `json:"instance_id"`
	RunID      int64     `json:"run_id"`
	TaskID     string    `json:"task"`
	Ticket     string    `json:"ticket,omitempty"`
	From       State     `json:"from"`
	To         State     `json:"to"`
	Reason     string    `json:"reason"`
	Actor      string    `json:"actor"`
	Epoch      int64     `json:"epoch"`
	At         time.Time `json:"at"`
}

// Action is one entry of the action log: an operator action or an automatic
// decision (dispatch, result, retry, timeout, breaker, misfire, pause …).
type Action struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Action     string    `json:"action"`
	Pipeline   string    `json:"pipeline,omitempty"`
	TaskID     string    `json:"task,omitempty"`
	InstanceID int64     `json:"instance_id,omitempty"`
	Ticket     string    `json:"ticket,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Detail     string    `json:"detail,omitempty"` // free text or JSON
}
