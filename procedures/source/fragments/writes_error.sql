-- The outcomes that write the error code and message: a failure, a retry and an ambiguous outcome.
{{outcome}} IN ('Failed', 'Retrying', 'UnknownOutcome')
