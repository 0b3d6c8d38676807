"""AWS glue shared by the handlers: settings, observability, the DynamoDB store, HTTP plumbing."""
