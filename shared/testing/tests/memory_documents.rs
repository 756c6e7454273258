//! The in-memory documents' ports pass the documents' contract, as DynamoDB's records and the knowledge base's index
//! do (shared/aws/tests/documents.rs).

async fn fresh() -> chat_testing::document_contract::Subject {
    chat_testing::document_contract::Subject::in_memory()
}

chat_testing::document_contract!(fresh());
