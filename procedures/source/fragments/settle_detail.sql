-- The audit event's detail of the end of a claim: {{detail}} when given, else the outcome's standard
-- text ({{to_status}}: the status written).
COALESCE({{detail}}, CASE
  WHEN {{outcome}} = 'Sent' THEN CONCAT('provider_message_id=', {{provider_message_id}})
  WHEN {{outcome}} = 'UnknownOutcome' THEN
    LEFT(CONCAT('ambiguous provider outcome: ', COALESCE({{error_message}}, '?')), 2000)
  WHEN {{outcome}} = 'Failed' THEN CONCAT('permanent failure: ', COALESCE({{error_code}}, '?'))
  WHEN {{outcome}} = 'Retrying' AND {{to_status}} = 'Failed' THEN
    CONCAT('attempts used up: ', COALESCE({{error_code}}, '?'))
  WHEN {{outcome}} = 'Retrying' THEN CONCAT('transient failure: ', COALESCE({{error_code}}, '?'))
  ELSE CONCAT('released, due again in ', {{delay}}, 's')
END)
